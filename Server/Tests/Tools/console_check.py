#!/usr/bin/env python3
"""Drives Courier's web console in a real headless Chromium, as an operator would (issues 21 and 36): sign in, look a
group message up, page its unread list, list and search conversations and accounts, deactivate and reactivate one, see
its devices and conversations, retry a failed webhook, purge a conversation,
pause and resume an endpoint, read the configuration, at desktop and phone width. Confirmations are accepted.

Playwright (PyPI) drives Debian's `chromium` (CHROMIUM, default /usr/bin/chromium). The argument is a JSON object:
{"url", "secret", "conversation", "account", "message", "endpoint", "unreadTotal", "screenshots"}. Prints one line per
check; exits 1 on the first failure."""
import json
import re
import os
import sys

from playwright.sync_api import expect, sync_playwright


def check(name, condition, detail=""):
    if not condition:
        raise AssertionError(f"{name}: {detail}")
    print(f"ok {name}", flush=True)


def accessible(page, name):
    """Every form control has a label, every chart a text alternative, every button a name."""
    problems = page.evaluate(
        """() => {
            const problems = [];
            for (const control of document.querySelectorAll('input, select')) {
                if (!control.id || !document.querySelector(`label[for="${control.id}"]`)) problems.push(control.outerHTML);
            }
            for (const svg of document.querySelectorAll('svg')) {
                if (!svg.getAttribute('aria-label')) problems.push('svg without aria-label');
            }
            for (const button of document.querySelectorAll('button')) {
                if (!(button.getAttribute('aria-label') || button.textContent.trim())) problems.push(button.outerHTML);
            }
            if (!document.documentElement.lang) problems.push('no lang');
            return problems;
        }"""
    )
    check(f"{name}: labels and text alternatives", not problems, problems)


def fits(page, name):
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    check(f"{name}: no sideways scrolling", overflow <= 0, f"{overflow}px too wide")


def main():
    args = json.loads(sys.argv[1])
    shots = args["screenshots"]
    os.makedirs(shots, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=os.environ.get("CHROMIUM") or next((p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium") if os.path.exists(p)), "chromium"),
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        page = browser.new_page(viewport={"width": 1100, "height": 760})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        # Script errors, and resources that failed to load, but for the 401 of the wrong secret and the 403s of the
        # read-only key, tried on purpose.
        page.on("console", lambda message: errors.append(message.text)
                if message.type == "error" and "status of 401" not in message.text
                and "status of 403" not in message.text else None)
        # Every action that changes something for users asks first: the operator says yes.
        dialogs = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))

        # Sign in: a wrong secret is refused, the right one opens the overview with live metrics.
        page.goto(args["url"] + "/console")
        accessible(page, "sign-in")
        page.get_by_label("App secret").fill("not-the-secret-" + "x" * 20)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#status")).to_contain_text("refused")
        page.get_by_label("App secret").fill(args["secret"])
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        expect(page.locator("#metric-cards .card").first).to_be_visible()
        expect(page.locator("svg.chart")).to_be_visible()
        check("overview: metrics shown", page.locator("#metric-cards .card").count() >= 6)
        expect(page.locator("#metric-cards")).to_contain_text("REST requests")
        expect(page.locator("figcaption")).to_contain_text("last 4 s", timeout=15000)  # a second sample: a rate
        accessible(page, "overview")
        page.screenshot(path=f"{shots}/console-overview.png")

        # The conversations: all of them, then those of one member, then one kind.
        page.get_by_role("link", name="Conversations").click()
        expect(page.get_by_role("link", name=args["conversation"])).to_be_visible()
        check("conversations: listed", page.get_by_role("link", name=args["direct"]).count() == 1)
        page.get_by_label("With member").fill(args["directPeer"])
        page.get_by_role("button", name="Search").click()
        expect(page).to_have_url(re.compile("member="))
        expect(page.locator("table tbody tr")).to_have_count(2)
        listed = page.locator("table tbody tr").all_inner_texts()
        check("conversations: search by member", {row.split()[0] for row in listed} == {args["direct"], args["conversation"]},
              listed)
        page.get_by_label("Kind").select_option("group")
        page.get_by_label("With member").fill("")
        page.get_by_role("button", name="Search").click()
        expect(page).to_have_url(re.compile("kind=group"))
        expect(page.locator("table tbody tr")).to_have_count(1)
        check("conversations: groups only", page.get_by_role("link", name=args["conversation"]).count() == 1)
        accessible(page, "conversations")
        page.screenshot(path=f"{shots}/console-conversations.png")
        page.set_viewport_size({"width": 360, "height": 740})
        fits(page, "conversations at 360 px")
        page.set_viewport_size({"width": 1100, "height": 760})

        # A group message: from the conversation to its unread list, paged.
        page.get_by_label("Conversation (d:A:B or g:GROUP)").fill(args["conversation"])
        page.get_by_label("As member").fill(args["account"])
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("link", name="Read and unread")).to_be_visible()
        check("conversation: a profile change in words",
              page.get_by_text("Group profile: name “Lunch club”, announcement cleared").count() == 1)
        accessible(page, "conversation")
        page.screenshot(path=f"{shots}/console-conversation.png")
        page.get_by_role("link", name="Read and unread").click()
        total = f"{args['unreadTotal']} have not read it."
        expect(page.locator("#receipt-total")).to_have_text(total)
        first = page.locator("table tbody tr").all_inner_texts()
        check("receipts: first page of 20", len(first) == 20, len(first))
        page.screenshot(path=f"{shots}/console-receipts.png")
        page.get_by_role("button", name="Next page").click()
        expect(page.locator("#receipt-total")).to_have_text(total)
        expect(page.locator("table tbody tr").first).not_to_have_text(first[0])  # the next page is drawn
        second = page.locator("table tbody tr").all_inner_texts()
        check("receipts: the rest on the next page", len(second) == args["unreadTotal"] - 20 and not set(first) & set(second),
              second)
        accessible(page, "receipts")

        # A direct conversation: each member's delivered and read state.
        page.get_by_role("link", name="Conversations").click()
        page.get_by_label("Conversation (d:A:B or g:GROUP)").fill(args["direct"])
        page.get_by_label("As member").fill(args["account"])
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("caption").first).to_contain_text("Delivered and read")
        # The peer read message 1 (so it has it too): delivered and read both up to seq 1.
        reader = page.get_by_role("row").filter(has_text=args["directPeer"])
        expect(reader).to_have_count(1)
        cells = reader.get_by_role("cell").all_inner_texts()
        check("direct: the peer's delivered and read state", len(cells) == 4 and cells[1].startswith("up to seq 1")
              and cells[2].startswith("up to seq 1"), cells)
        accessible(page, "direct conversation")
        page.screenshot(path=f"{shots}/console-direct.png")
        page.go_back()
        page.go_back()
        # Back on the unread list's second page: wait for it (a slow load finishing later would draw over the next
        # page the test opens).
        expect(page.locator("#receipt-total")).to_have_text(total)

        # The same page at phone width.
        page.set_viewport_size({"width": 360, "height": 740})
        fits(page, "receipts at 360 px")
        page.screenshot(path=f"{shots}/console-receipts-phone.png", full_page=True)
        page.set_viewport_size({"width": 1100, "height": 760})

        # Accounts: the list, a search by prefix, one account deactivated and reactivated (each asked first).
        check("navigation: receipts", page.get_by_role("link", name="Receipts").count() == 1)
        page.get_by_role("link", name="Accounts").click()
        expect(page.get_by_role("link", name="m24")).to_be_visible()
        page.get_by_label("Accounts starting with").fill("m0")
        page.get_by_role("button", name="Search").click()
        expect(page.get_by_role("caption")).to_have_text("Accounts starting with m0")
        listed = page.locator("table tbody tr").all_inner_texts()
        check("accounts: search by prefix", len(listed) == 9 and all(row.startswith("m0") for row in listed), listed)
        accessible(page, "accounts")
        page.screenshot(path=f"{shots}/console-accounts.png")
        page.set_viewport_size({"width": 360, "height": 740})
        fits(page, "accounts at 360 px")
        page.set_viewport_size({"width": 1100, "height": 760})
        page.get_by_label("Account", exact=True).fill(args["account"])
        page.get_by_role("button", name="Look up").click()
        expect(page.get_by_role("heading", name=args["account"])).to_be_visible()
        expect(page.get_by_text("Devices online")).to_be_visible()
        expect(page.get_by_role("caption").filter(has_text="Connected devices")).to_be_visible()
        joined = page.get_by_role("table", name="Conversations", exact=True)
        expect(joined.get_by_role("link", name=args["conversation"])).to_be_visible()
        check("account: its conversations", joined.get_by_role("link", name=args["direct"]).count() == 1)
        expect(page.locator("#account-state")).to_have_text("Active")
        # Its profile, and a rename (a moderator's: asked first, told to its contacts).
        expect(page.locator("#account-profile")).to_contain_text("Shown as “Alice”")
        check("account: the avatar as text", "avatar https://example.com/a.png" in page.locator("#account-profile").inner_text())
        page.get_by_label("Display name").fill("Alice (renamed)")
        page.get_by_role("button", name="Save display name").click()
        expect(page.locator("#account-profile")).to_contain_text("Shown as “Alice (renamed)”")
        check("account: a rename asked first", dialogs[-1].startswith(f"Change {args['account']}'s display name"), dialogs)
        page.get_by_role("button", name="Deactivate").click()
        expect(page.locator("#account-state")).to_contain_text("Deactivated")
        expect(page.locator("#status")).to_contain_text("is deactivated")
        check("accounts: deactivation asked first", dialogs[-1] == f"Deactivate {args['account']}?", dialogs)
        page.screenshot(path=f"{shots}/console-account.png")
        page.get_by_role("button", name="Reactivate").click()
        expect(page.locator("#account-state")).to_have_text("Active")
        accessible(page, "account")

        # A failed webhook delivery, retried with its button.
        page.goto(args["url"] + f"/console#/webhooks?endpoint={args['endpoint']}&state=failed")
        retry = page.locator("button.retry")
        expect(retry.first).to_be_visible()
        failed = retry.count()
        page.screenshot(path=f"{shots}/console-webhooks.png")
        retry.first.click()
        expect(page.locator("#status")).to_contain_text("is pending again")
        expect(page.locator("button.retry")).to_have_count(failed - 1)
        check("webhooks: a failed delivery retried", True)
        accessible(page, "webhooks")
        # The endpoint paused (asked first), then resumed.
        page.get_by_role("button", name=f"Pause {args['endpoint']}").click()
        expect(page.get_by_role("cell", name="Paused", exact=False)).to_be_visible()
        check("webhooks: pausing asked first", dialogs[-1].startswith(f"Pause {args['endpoint']}?"), dialogs)
        page.screenshot(path=f"{shots}/console-webhooks-paused.png")
        page.get_by_role("button", name=f"Resume {args['endpoint']}").click()
        expect(page.get_by_role("button", name=f"Pause {args['endpoint']}")).to_be_visible()

        # An endpoint added (its secret shown once), its secret rotated (asked first), then deleted (asked first).
        page.get_by_label("New endpoint URL (http or https)").fill("http://127.0.0.1:9/console-added")
        page.get_by_label("Event types (comma-separated; empty for all)").fill("message.created, message.read")
        page.get_by_role("button", name="Add endpoint").click()
        expect(page.locator("#new-secret")).to_contain_text("whsec_")
        added = page.locator("#status").inner_text().split(" ")[0]
        check("webhooks: an endpoint added", added.startswith("whep_"), added)
        expect(page.get_by_role("cell", name="message.created, message.read")).to_be_visible()
        first_secret = page.locator("#new-secret code").inner_text()
        page.get_by_role("button", name=f"Rotate the secret of {added}").click()
        expect(page.locator("#status")).to_contain_text("has a new secret")
        check("webhooks: a rotated secret shown", page.locator("#new-secret code").inner_text() not in ("", first_secret))
        accessible(page, "webhooks with a new endpoint")
        page.get_by_role("button", name=f"Delete {added}").click()
        expect(page.locator("#status")).to_contain_text("deleted")
        expect(page.get_by_role("button", name=f"Delete {added}")).to_have_count(0)
        check("webhooks: deleting asked first", dialogs[-1].startswith(f"Delete {added} and its deliveries"), dialogs)

        # The effective configuration, secrets masked.
        page.get_by_role("link", name="Configuration").click()
        expect(page.get_by_role("cell", name="recall-window-seconds", exact=True)).to_be_visible()
        check("configuration: the secret is not shown", args["secret"] not in page.content())
        fits(page, "configuration")
        page.screenshot(path=f"{shots}/console-configuration.png")

        # A conversation's history purged (asked first): its messages become tombstones.
        page.get_by_role("link", name="Conversations").click()
        page.get_by_label("Conversation (d:A:B or g:GROUP)").fill(args["direct"])
        page.get_by_label("As member").fill(args["account"])
        page.get_by_role("button", name="Show").click()
        expect(page.get_by_role("cell", name="Hi!")).to_be_visible()
        page.get_by_role("button", name="Purge history").click()
        expect(page.locator("#status")).to_contain_text("1 of")
        check("purge: asked first", dialogs[-1].startswith(f"Erase every message of {args['direct']}"), dialogs)
        expect(page.get_by_role("cell", name="Hi!")).to_have_count(0)
        expect(page.get_by_text("Recalled", exact=True)).to_be_visible()
        page.screenshot(path=f"{shots}/console-purged.png")

        # Keys (issue 50): a read-only key made (its credential shown once), a signing key rotated, the audit trail
        # naming who did what from where; then signed in with the key, which reads but may not manage keys; revoked.
        page.get_by_role("link", name="Keys").click()
        expect(page.get_by_role("heading", name="Keys", exact=True)).to_be_visible()
        page.get_by_label("Name", exact=True).fill("dashboard")
        page.get_by_label("read", exact=True).check()
        page.get_by_role("button", name="Make key").click()
        expect(page.locator("#new-credential")).to_contain_text("ck_")
        credential = page.locator("#new-credential code").inner_text()
        key_id = credential.split("_")[1]
        expect(page.get_by_role("cell", name="dashboard")).to_be_visible()
        accessible(page, "keys")
        page.get_by_role("button", name="New signing key").click()
        expect(page.locator("#status")).to_contain_text("signs from now on")
        check("keys: a new signing key asked first", dialogs[-1].startswith("Make a new signing key?"), dialogs)
        expect(page.get_by_role("cell", name="Signs", exact=True)).to_have_count(1)
        check("keys: the old signing key retires", page.get_by_role("cell", name=re.compile("^Retires ")).count() == 1)
        page.screenshot(path=f"{shots}/console-keys.png")
        page.set_viewport_size({"width": 360, "height": 740})
        fits(page, "keys at 360 px")
        page.set_viewport_size({"width": 1100, "height": 760})
        page.get_by_role("link", name="Audit").click()
        made = page.get_by_role("row").filter(has_text="createAPIKey")
        expect(made).to_have_count(1)
        check("audit: the key's making, by the app secret, from this browser",
              "root" in made.inner_text() and "127.0.0.1" in made.inner_text() and "201" in made.inner_text(), made.inner_text())
        accessible(page, "audit")
        page.screenshot(path=f"{shots}/console-audit.png")
        page.get_by_role("button", name="Sign out").click()
        page.get_by_label("App secret or API key").fill(credential)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        page.get_by_role("link", name="Configuration").click()
        expect(page.get_by_role("cell", name="recall-window-seconds", exact=True)).to_be_visible()
        page.get_by_role("link", name="Keys").click()
        expect(page.locator("#status")).to_contain_text("may not do that")
        check("keys: a read key reads, and may not manage keys", True)
        page.get_by_role("button", name="Sign out").click()
        page.get_by_label("App secret or API key").fill(args["secret"])
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("link", name="Keys").click()
        page.get_by_role("button", name=f"Revoke {key_id}").click()
        expect(page.get_by_role("cell", name=re.compile("^Revoked "))).to_have_count(1)
        check("keys: revoking asked first", dialogs[-1].startswith(f"Revoke {key_id} (dashboard)?"), dialogs)

        check("no script errors", not errors, errors)
        browser.close()


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 - report any failure as one line
        print(f"FAILED {type(error).__name__}: {error}", flush=True)
        sys.exit(1)
