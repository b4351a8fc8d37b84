package store

import (
	"encoding/json"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ironlink/ironlink/internal/condition"
)

// healthColumns renders a health condition's detail for the health (JSON)
// and expire_at columns; both null on the fixed conditions (h nil).
func healthColumns(h *condition.Health) (pgtype.Text, pgtype.Timestamptz) {
	if h == nil {
		return pgtype.Text{}, pgtype.Timestamptz{}
	}
	b, _ := json.Marshal(h) // a struct of strings, numbers, times: cannot fail
	return pgtype.Text{String: string(b), Valid: true}, pgtype.Timestamptz{Time: h.ExpireTime, Valid: !h.ExpireTime.IsZero()}
}

// decodeHealth decodes a health column read as text (health::text); nil
// for NULL and for a value that does not decode (never written so).
func decodeHealth(t pgtype.Text) *condition.Health {
	if !t.Valid {
		return nil
	}
	var h condition.Health
	if err := json.Unmarshal([]byte(t.String), &h); err != nil {
		return nil
	}
	return &h
}
