package heraldtype_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

func TestTenantLimitsJSON(t *testing.T) {
	l := heraldtype.TenantLimits{MaxQueuedEvents: 5, EventRetention: 36 * time.Hour}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"max_queued_events":5,"event_retention":"36h0m0s"}`; got != want {
		t.Fatalf("Marshal = %s, want %s", got, want)
	}
	if b, _ := json.Marshal(heraldtype.TenantLimits{}); string(b) != `{}` {
		t.Fatalf("zero limits marshal to %s", b)
	}
	for _, c := range []struct {
		in   string
		want heraldtype.TenantLimits
	}{
		{`{"max_queued_events":5,"event_retention":"36h"}`, l},
		{`{"event_retention":60000000000}`, heraldtype.TenantLimits{EventRetention: time.Minute}},
		{`{"event_retention":null,"max_payload_depth":3}`, heraldtype.TenantLimits{MaxPayloadDepth: 3}},
		{`{"max_unconsumed_events":1,"max_carry_forward_executions":2,"max_payload_bytes":4}`,
			heraldtype.TenantLimits{MaxUnconsumedEvents: 1, MaxCarryForwardExecutions: 2, MaxPayloadBytes: 4}},
	} {
		var got heraldtype.TenantLimits
		if err := json.Unmarshal([]byte(c.in), &got); err != nil || got != c.want {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`{"event_retention":"soon"}`, `{"event_retention":1.5}`, `{"event_retention":true}`, `{"max_queued_events":"x"}`} {
		var got heraldtype.TenantLimits
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", bad, got)
		}
	}
	tn := heraldtype.Tenant{ID: "acme", Limits: l, CreatedAt: time.Unix(0, 0).UTC()}
	b, _ = json.Marshal(tn)
	var back heraldtype.Tenant
	if err := json.Unmarshal(b, &back); err != nil || back.ID != "acme" || back.Limits != l {
		t.Fatalf("Tenant round trip %s: %+v, %v", b, back, err)
	}
}

func TestTenantLimitsValidate(t *testing.T) {
	if err := (&heraldtype.TenantLimits{MaxQueuedEvents: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []heraldtype.TenantLimits{{MaxPayloadDepth: -1}, {EventRetention: -1}} {
		if err := l.Validate(); !errors.Is(err, heraldtype.ErrInvalidArgument) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidArgument", l, err)
		}
	}
}
