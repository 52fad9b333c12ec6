package jstarget

import (
	"encoding/json"
	"testing"

	"github.com/dop251/goja"
)

// ctx built in Go (sandboxValues) is what JSON.parse and the recursive
// freeze in JavaScript (sandboxValuesJS) build: the same values, types and
// key order, every object and array frozen, a "__proto__" key an own
// property, a repeated key in its first place with its last value.
func TestSandboxValuesMatchJavaScript(t *testing.T) {
	describe := goja.MustCompile("describe", `(function (ctx, PermanentError) {
		'use strict';
		function d(v) {
			if (v === null || typeof v !== 'object') {
				return typeof v + ':' + (Object.is(v, -0) ? '-0' : String(v));
			}
			var proto = Object.getPrototypeOf(v) === Array.prototype ? 'array' :
				Object.getPrototypeOf(v) === Object.prototype ? 'object' : 'other';
			var parts = Object.getOwnPropertyNames(v).map(function (k) {
				var p = Object.getOwnPropertyDescriptor(v, k);
				return JSON.stringify(k) + (p.writable ? 'w' : '') + (p.configurable ? 'c' : '') + (p.enumerable ? 'e' : '') + '=' + d(v[k]);
			});
			return proto + (Object.isFrozen(v) ? '(frozen)' : '(open)') + '{' + parts.join(',') + '}';
		}
		var e = new PermanentError('m');
		return d(ctx) + ' | ' + [Object.isFrozen(PermanentError), Object.isFrozen(PermanentError.prototype),
			e instanceof Error, e.name, e.message].join(',');
	})`, true)
	for _, event := range []string{
		`{"id":"e1","type":"order.paid","data":{"amount":12,"order_id":"A-1"},"timestamp":"2030-01-01T00:00:00Z"}`,
		`{"data":null}`,
		`{"data":[1,-0,0.5,1e300,-1e300,12345678901234567890,1.5e-320,true,false,null,"",[],{}]}`,
		`{"data":{"__proto__":{"isAdmin":true},"b":1,"a":2,"b":3,"2":"two","1":"one","":"empty"}}`,
		`{"data":"esc \"q\" \\ \/ \b\f\n\r\t \u0041 \u00e9 \u20ac é 😀 <>&"}`,
		`{"data":"\ud83d\ude00 \ud800 lone"}`,
		` { "data" : [ 1 , { "x" : [ ] } ] } `,
		`[1,2,[3]]`,
		`"just a string"`,
		`42`,
	} {
		t.Run(event, func(t *testing.T) {
			got := func(build func(*goja.Runtime, json.RawMessage, json.RawMessage) (goja.Value, goja.Value, error)) string {
				vm := goja.New()
				ctx, perm, err := build(vm, json.RawMessage(event), json.RawMessage(`{"id":"acme"}`))
				if err != nil {
					t.Fatal(err)
				}
				fnVal, err := vm.RunProgram(describe)
				if err != nil {
					t.Fatal(err)
				}
				fn, _ := goja.AssertFunction(fnVal)
				v, err := fn(goja.Undefined(), ctx, perm)
				if err != nil {
					t.Fatal(err)
				}
				return v.String()
			}
			goSide, jsSide := got(sandboxValues), got(sandboxValuesJS)
			if goSide != jsSide {
				t.Fatalf("built in Go:\n%s\nby JSON.parse and a freeze in JavaScript:\n%s", goSide, jsSide)
			}
		})
	}
}

// Text that is not JSON is an error of sandboxValues, never a panic, as
// it is of JSON.parse (a number out of range too).
func TestSandboxValuesRefuseBadJSON(t *testing.T) {
	for _, bad := range []string{``, `{`, `{"a"}`, `{"a":}`, `[1,]`, `[1 2]`, `{"a":1,}`, `tru`, `-`, `01`, `1.`, `"open`,
		`{"a":1} x`, `{"a":"` + "\x01" + `"}`, `{a:1}`, `1e400`} {
		if _, _, err := sandboxValues(goja.New(), json.RawMessage(bad), json.RawMessage(`{"id":"acme"}`)); err == nil {
			t.Errorf("%q: no error", bad)
		}
		if _, _, err := sandboxValuesJS(goja.New(), json.RawMessage(bad), json.RawMessage(`{"id":"acme"}`)); err == nil {
			t.Errorf("%q: no error from JSON.parse either", bad)
		}
	}
}
