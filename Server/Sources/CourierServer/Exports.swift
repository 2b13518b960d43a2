// Courier — Apache-2.0
// The executables, the bench and the tests import `CourierServer` alone: the core's public API (the configuration,
// the services' errors, the metrics) comes with it (ADR 0058).
@_exported public import CourierServerCore
