package operations

import (
	"fmt"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// checkAdoptParams validates ADOPT's instance_info (docs/reference/operations.md
// "Adopt"): image_source required (Ironic's boot interface validates it on
// adoption, and a later undeploy or rebuild reads it); the checksum, when
// given, in one of Ironic's forms (optional: the image is already on the
// machine); root_gb not negative; capabilities as DEPLOY's.
func checkAdoptParams(a *ironlinkv1.AdoptParams) error {
	if a.GetImageSource() == "" {
		return bad("params.adopt.image_source", grpcerr.ReasonRequired, "ADOPT needs params.adopt.image_source: the image the machine runs (a URL or Glance image id), which Ironic requires in instance_info")
	}
	if err := textcheck.Line("params.adopt.image_source", a.GetImageSource(), 2048); err != nil {
		return grpcerr.FromCheck(err)
	}
	if c := a.GetImageChecksum(); c != "" && !checksumRe.MatchString(c) {
		return bad("params.adopt.image_checksum", grpcerr.ReasonInvalidValue, "params.adopt.image_checksum "+textcheck.Quote(c)+" is not a checksum (hex, \"<algo>:<hex>\" or a checksum file URL)")
	}
	if a.GetRootGb() < 0 {
		return bad("params.adopt.root_gb", grpcerr.ReasonOutOfRange, fmt.Sprintf("params.adopt.root_gb %d is negative", a.GetRootGb()))
	}
	for k, v := range a.GetCapabilities() {
		if !keyRe.MatchString(k) {
			return bad("params.adopt.capabilities", grpcerr.ReasonInvalidValue, "capability "+textcheck.Quote(k)+" is not a capability name")
		}
		if err := textcheck.Line("params.adopt.capabilities["+k+"]", v, 255); err != nil {
			return grpcerr.FromCheck(err)
		}
	}
	return nil
}
