// Package validation is the hub's side of validation runs
// (docs/reference/hardware.md "Validation"): ValidationService, where
// external checkers record their checks' results against a run (bound to
// the checker's roster site), and the Runner that decides each open run
// once its VALIDATE operation ended: the inspected hardware against its
// profile (the hub's own check, "hardware-profile"), then the required
// checks' results; a pass offers the device as OfferDevice does
// (recorded), a failure leaves it held with the failing checks named (a
// validation rule of the policy may then start its remediation ladder:
// hub/remediation/validation.go).
package validation
