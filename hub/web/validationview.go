package web

import (
	"strings"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/internal/wire"
)

// The device page's validation runs (docs/reference/web.md "Device
// page"): GetDevice's newest runs with each check's name, result,
// duration, output excerpt (expandable) and artifacts link.

func init() {
	funcs["runState"] = func(s ironlinkv1.ValidationRunState) string {
		return strings.ToLower(wire.EnumName(s, "VALIDATION_RUN_STATE_"))
	}
	funcs["checkResult"] = func(r ironlinkv1.ValidationResult) string {
		return strings.ToLower(wire.EnumName(r, "VALIDATION_RESULT_"))
	}
	funcs["checkDur"] = func(c *ironlinkv1.ValidationCheckResult) string {
		if c.GetDuration() == nil {
			return ""
		}
		return c.GetDuration().AsDuration().String()
	}
}
