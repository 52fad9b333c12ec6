package heraldtype_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

func TestRetryPolicyJSON(t *testing.T) {
	p := heraldtype.RetryPolicy{MaxAttempts: 5, InitialInterval: 1500 * time.Millisecond, BackoffCoefficient: 2, MaxInterval: time.Minute}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"max_attempts":5,"initial_interval":"1.5s","backoff_coefficient":2,"max_interval":"1m0s"}`; string(b) != want {
		t.Fatalf("encoded %s, want %s", b, want)
	}
	for _, in := range []string{string(b), `{"max_attempts":5,"initial_interval":1500000000,"backoff_coefficient":2,"max_interval":60000000000}`} {
		var got heraldtype.RetryPolicy
		if err := json.Unmarshal([]byte(in), &got); err != nil || got != p {
			t.Fatalf("decode %s: %+v, %v; want %+v", in, got, err, p)
		}
	}
	for _, bad := range []string{`{"initial_interval":"soon"}`, `{"max_interval":true}`, `{"max_interval":1.5}`} {
		var got heraldtype.RetryPolicy
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Fatalf("decode %s: %+v, want an error", bad, got)
		}
	}
}

func TestEventDefinitionJSON(t *testing.T) {
	d := heraldtype.EventDefinition{Name: "order.paid", Buffer: heraldtype.BufferLatest, Retention: 36 * time.Hour,
		Correlation: &heraldtype.CorrelationConfig{TTL: 90 * time.Minute, DeleteAfterFirstCorrelation: true}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"order.paid","buffer":"latest","correlation":{"ttl":"1h30m0s","delete_after_first_correlation":true},"retention":"36h0m0s"}`
	if string(b) != want {
		t.Fatalf("encoded %s, want %s", b, want)
	}
	var got heraldtype.EventDefinition
	if err := json.Unmarshal(b, &got); err != nil || got.Retention != d.Retention || *got.Correlation != *d.Correlation || got.Name != d.Name {
		t.Fatalf("decoded %+v, %v", got, err)
	}
}

func TestFailureErr(t *testing.T) {
	nd := &heraldtype.NondeterminismError{InstanceID: "i", Seq: 3, Expected: "a", Actual: "b"}
	var got *heraldtype.NondeterminismError
	if err := nd.Failure().Err(); !errors.As(err, &got) || *got != *nd {
		t.Fatalf("nondeterminism failure back as %v", err)
	}
	var we *heraldtype.WorkflowError
	if err := (&heraldtype.Failure{Kind: heraldtype.FailureActivity, Message: "x"}).Err(); !errors.As(err, &we) || we.Kind != "activity" {
		t.Fatalf("activity failure back as %v", err)
	}
	if (*heraldtype.Failure)(nil).Err() != nil {
		t.Fatal("nil failure is an error")
	}
}
