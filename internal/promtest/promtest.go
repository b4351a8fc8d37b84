// Package promtest reads a Prometheus /metrics page the way a scraper would,
// for tests that assert the series a user alerts on. It is only imported by
// tests.
package promtest

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Page is one parsed scrape: metric families by name.
type Page map[string]*dto.MetricFamily

// Scrape GETs url (a /metrics endpoint) and parses the text format; any
// failure fails the test.
func Scrape(tb testing.TB, url string) Page {
	tb.Helper()
	p, err := TryScrape(url)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// TryScrape is Scrape returning the error.
func TryScrape(url string) (Page, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	return Page(fams), nil
}

// Value returns the value of the series name whose labels include every
// pair in labels ("k", "v", ...): a counter's or gauge's value, a
// histogram's sample count (use name_sum for the sum). ok is false when no
// such series exists. More than one match is summed.
func (p Page) Value(name string, labels ...string) (v float64, ok bool) {
	famName, sum := name, false
	if base, found := strings.CutSuffix(name, "_sum"); found && p[base] != nil && p[base].GetType() == dto.MetricType_HISTOGRAM {
		famName, sum = base, true
	}
	fam := p[famName]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		ok = true
		switch {
		case m.GetCounter() != nil:
			v += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			v += m.GetGauge().GetValue()
		case m.GetHistogram() != nil && sum:
			v += m.GetHistogram().GetSampleSum()
		case m.GetHistogram() != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		case m.GetUntyped() != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, ok
}

// Series lists the label sets of name, each as "k=v,k=v" sorted, for
// failure messages.
func (p Page) Series(name string) []string {
	var out []string
	for _, m := range p[name].GetMetric() {
		var kv []string
		for _, l := range m.GetLabel() {
			kv = append(kv, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(kv)
		out = append(out, strings.Join(kv, ","))
	}
	slices.Sort(out)
	return out
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
