package operations

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
	"github.com/ironlink/ironlink/hub/grpcerr"
	"github.com/ironlink/ironlink/hub/novatemplate"
	"github.com/ironlink/ironlink/internal/textcheck"
)

// expandTemplate returns the stored params of an operation at site: raw
// (the request's, encoded) unless p names a Nova create template, else p
// with the site's template filled in (fields set in p win), checked again
// and encoded. A template the site does not have is InvalidArgument
// UNKNOWN_TEMPLATE naming it.
func (s *Server) expandTemplate(site string, p *ironlinkv1.OperationParams, raw []byte) ([]byte, error) {
	name := p.GetNovaCreate().GetTemplate()
	if name == "" {
		return raw, nil
	}
	var f *novatemplate.File
	if s.cfg.NovaTemplates != nil {
		f = s.cfg.NovaTemplates()
	}
	t, ok := f.Lookup(site, name)
	if !ok {
		return nil, grpcerr.InvalidArgument("params.nova_create.template", grpcerr.ReasonInvalidValue,
			fmt.Sprintf("params.nova_create.template: no Nova create template %s for site %s", textcheck.Quote(name), textcheck.Quote(site)))
	}
	out := ExpandParams(p, t)
	if err := checkNovaCreateParams(out.GetNovaCreate()); err != nil {
		return nil, err
	}
	b, err := marshal(out)
	if err != nil { // validated: cannot happen; no input echoed
		return nil, grpcerr.Internal("cannot encode the operation's params")
	}
	return b, nil
}

// SetNovaTemplates gives the server the --nova-templates-file in force
// (call before serving).
func (s *Server) SetNovaTemplates(f func() *novatemplate.File) { s.cfg.NovaTemplates = f }

// ExpandParams returns p with its NovaCreate filled from t
// (novatemplate.Expand); p is not changed.
func ExpandParams(p *ironlinkv1.OperationParams, t novatemplate.Template) *ironlinkv1.OperationParams {
	out := &ironlinkv1.OperationParams{}
	if p != nil {
		out = proto.CloneOf(p)
	}
	out.NovaCreate = novatemplate.Expand(t, p.GetNovaCreate())
	return out
}
