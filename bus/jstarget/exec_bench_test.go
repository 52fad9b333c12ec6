package jstarget

import (
	"encoding/json"
	"testing"

	"github.com/dop251/goja"
)

// BenchmarkExecute: one execution inside a child, without the pipe: a
// fresh runtime, the frozen ctx, the script.
func BenchmarkExecute(b *testing.B) {
	req := request{Name: "s", Source: "return 1;", TimeoutMS: 30000, Tenant: json.RawMessage(`{"id":"acme"}`),
		Event: json.RawMessage(`{"id":"e1","type":"order.paid","data":{"amount":12,"order_id":"A-1"},"timestamp":"2030-01-01T00:00:00Z"}`)}
	cache := map[string]*goja.Program{}
	b.ReportAllocs()
	for b.Loop() {
		if rep := execute(cache, req); rep.Error != nil {
			b.Fatal(rep.Error)
		}
	}
}
