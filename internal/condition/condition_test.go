package condition

import (
	"strings"
	"testing"
	"time"
)

func valid() Condition {
	return Condition{Type: Enrolled, Status: True, Reason: "Enrolled", ObservedTime: time.Now()}
}

func TestValidateReasonIsOneCamelCaseWord(t *testing.T) {
	for _, r := range []string{"Enrolled", "DeployFailed", "NoMaintenance", "BmcLostContact", "Fault503", "camelCase", strings.Repeat("A", MaxReasonBytes)} {
		c := valid()
		c.Reason = r
		if err := c.Validate(); err != nil {
			t.Errorf("reason %q refused: %v", r, err)
		}
	}
	for _, r := range []string{"Not CamelCase\nat all", "Two Words", "Dash-ed", "Under_score", "9Lives", "Ünicode", "Trailing ", " Leading", "Dot.", strings.Repeat("A", MaxReasonBytes+1)} {
		c := valid()
		c.Reason = r
		if err := c.Validate(); err == nil {
			t.Errorf("reason %q accepted", r)
		}
	}
	c := valid()
	c.Reason = "Not CamelCase"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "CamelCase") {
		t.Fatalf("error %v does not say what a reason must be", err)
	}
}

func TestValidateMessageLimitMatchesTruncate(t *testing.T) {
	c := valid()
	c.Message = Truncate(strings.Repeat("é", MaxMessageBytes)) // multi-byte runes, cut and "…" added
	if err := c.Validate(); err != nil {
		t.Fatalf("a Truncated message refused: %v", err)
	}
	c.Message = strings.Repeat("x", MaxMessageBytes)
	if err := c.Validate(); err != nil {
		t.Fatalf("a message of exactly %d bytes refused: %v", MaxMessageBytes, err)
	}
	c.Message += "x"
	err := c.Validate()
	if err == nil {
		t.Fatalf("a message of %d bytes accepted", MaxMessageBytes+1)
	}
	if !strings.Contains(err.Error(), "1025 bytes, limit 1024") {
		t.Fatalf("error %q does not state the size and the limit that was checked", err)
	}
}

func TestValidReasonOfSiteConditions(t *testing.T) {
	c := valid()
	c.Type, c.Reason = OpenStackAuthenticated, "Authentication failed"
	if err := c.ValidateSite(); err == nil {
		t.Fatal("site condition with a spaced reason accepted")
	}
}
