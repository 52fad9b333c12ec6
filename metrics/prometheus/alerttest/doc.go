// Package alerttest checks ../alerts.yml, Herald's Prometheus rules for
// the event bus, against the metrics package github.com/heraldwf/herald/metrics/prometheus
// with Prometheus's own code: the rule file is loaded by
// github.com/prometheus/prometheus/rules (which parses it with
// model/rulefmt and promql/parser), every metric a rule reads must be one
// the adapter exports, and every rule is evaluated by the real PromQL engine
// and rule groups over a TSDB filled with what the adapter exposed.
//
// It is a module of its own so that Herald's go.mod does not depend on
// Prometheus's server code. Run it with
//
//	cd metrics/prometheus/alerttest && go test ./...
package alerttest
