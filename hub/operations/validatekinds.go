package operations

import (
	"fmt"
	"regexp"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// MaxValidationChecks bounds a VALIDATE's params.validation_checks.
const MaxValidationChecks = 32

// CheckNameRe is a validation check's name: 1-64 bytes of letters,
// digits, '.', '_' and '-' (hub/validation takes results under it).
var CheckNameRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// checkValidateParams validates VALIDATE's optional clean steps and its
// check names (distinct, at most MaxValidationChecks).
func checkValidateParams(p *ironlinkv1.OperationParams) error {
	if len(p.GetCleanSteps()) > 0 {
		if err := checkCleanSteps(p.GetCleanSteps()); err != nil {
			return err
		}
	}
	checks := p.GetValidationChecks()
	if len(checks) > MaxValidationChecks {
		return bad("params.validation_checks", grpcerr.ReasonOutOfRange, fmt.Sprintf("params.validation_checks: %d, at most %d", len(checks), MaxValidationChecks))
	}
	seen := map[string]bool{}
	for i, c := range checks {
		f := fmt.Sprintf("params.validation_checks[%d]", i)
		if !CheckNameRe.MatchString(c) {
			return bad(f, grpcerr.ReasonInvalidValue, f+" "+textcheck.Quote(c)+" is not a check name (1-64 bytes of letters, digits, '.', '_', '-')")
		}
		if seen[c] || c == "hardware-profile" {
			return bad(f, grpcerr.ReasonInvalidValue, f+" "+textcheck.Quote(c)+" is named twice (hardware-profile is the hub's own check, always run)")
		}
		seen[c] = true
	}
	return nil
}
