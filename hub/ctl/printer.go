package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Output formats of -o.
const (
	outTable = ""
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
	outName  = "name"
)

func checkOutput(o string, allowed ...string) error {
	for _, a := range allowed {
		if o == a {
			return nil
		}
	}
	var names []string
	for _, a := range allowed {
		if a != "" {
			names = append(names, a)
		}
	}
	return usageErrf("-o %s: want one of %s", o, strings.Join(names, ", "))
}

// table writes aligned columns (two spaces apart, like kubectl), each line
// prefixed by indent.
type table struct {
	tw     *tabwriter.Writer
	indent string
}

func newTable(w io.Writer, indent string, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0), indent: indent}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	fmt.Fprintln(t.tw, t.indent+strings.Join(cells, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

// cell makes s safe for one table cell: one line, no tabs, "-" when empty.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	return s
}

// truncate shortens s to n runes with a trailing "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

var jsonOpts = protojson.MarshalOptions{Multiline: true, Indent: "  "}

// writeProto prints m as JSON (protojson, the proto's field names in
// lowerCamelCase, enums by name) or YAML (the same document).
func writeProto(w io.Writer, format string, m proto.Message) error {
	b, err := jsonOpts.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", format, err)
	}
	if format == outJSON {
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	y, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode yaml: %w", err)
	}
	_, err = w.Write(y)
	return err
}

// writeProtoLine prints m as one line of JSON (for --watch -o json).
func writeProtoLine(w io.Writer, m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// age formats the age of ts with a.opts.Age; "-" when unset.
func (a *app) age(ts *timestamppb.Timestamp) string {
	if ts == nil || (ts.GetSeconds() == 0 && ts.GetNanos() == 0) {
		return "-"
	}
	t := ts.AsTime()
	if a.ageAt != nil { // as old as it was then: shift t by how long ago then is
		t = t.Add(a.opts.Now().Sub(*a.ageAt))
	}
	return a.opts.Age(t)
}

// humanAge is a kubectl-like age of t at now: "12s", "3m12s", "45m",
// "5h3m", "20h", "3d4h", "40d".
func humanAge(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	s := int(d.Seconds())
	m, h, days := s/60, s/3600, s/86400
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case m < 10:
		return twoUnits(m, "m", s%60, "s")
	case h < 3:
		return fmt.Sprintf("%dm", m)
	case h < 8:
		return twoUnits(h, "h", m%60, "m")
	case h < 48:
		return fmt.Sprintf("%dh", h)
	case days < 8:
		return twoUnits(days, "d", h%24, "h")
	}
	return fmt.Sprintf("%dd", days)
}

// twoUnits is "3m12s", or "3m" when the smaller unit is 0.
func twoUnits(big int, bigUnit string, small int, smallUnit string) string {
	if small == 0 {
		return fmt.Sprintf("%d%s", big, bigUnit)
	}
	return fmt.Sprintf("%d%s%d%s", big, bigUnit, small, smallUnit)
}
