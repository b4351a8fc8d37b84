package devref_test

import (
	"errors"
	"testing"

	"github.com/ironlink/ironlink/internal/devref"
)

func TestParseAcceptsEveryDocumentedForm(t *testing.T) {
	const id = "6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a11"
	for _, c := range []struct {
		in   string
		want devref.Ref
	}{
		{"node-006", devref.Ref{Name: "node-006"}},
		{"b/node-006", devref.Ref{Site: "b", Name: "node-006"}},
		{id, devref.Ref{ID: id}},
		{"6B1C1C7E-3F0A-4D3E-9D33-2D5A1F1E0A11", devref.Ref{ID: id}},
		{"6b1c1c7e3f0a4d3e9d332d5a1f1e0a11", devref.Ref{ID: id}},
		{"site-a/" + id, devref.Ref{Site: "site-a", ID: id}},
		{"deadbeef", devref.Ref{Name: "deadbeef"}},
		{"a-b-c", devref.Ref{Name: "a-b-c"}},
		{"gpu.node_1~x", devref.Ref{Name: "gpu.node_1~x"}},
	} {
		got, err := devref.Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if err == nil && c.want.ID == "" && got.String() != c.in {
			t.Errorf("Parse(%q).String() = %q", c.in, got.String())
		}
	}
}

func TestParseRefusesEverythingElse(t *testing.T) {
	for _, in := range []string{
		"",
		"/node-1",
		"site-a/",
		"a/b/c",
		"Site_A/node-1",                         // not a site name
		"6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a1",   // a digit short
		"6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a111", // a digit long
		"6b1c1c7e-3f0a-4d3e-9d33",               // truncated
		"site-a/6b1c1c7e-3f0a-4d3e-9d33-2d5a1f1e0a1",
	} {
		_, err := devref.Parse(in)
		var de *devref.Error
		if !errors.As(err, &de) {
			t.Errorf("Parse(%q) = %v, want a *devref.Error", in, err)
		}
	}
}
