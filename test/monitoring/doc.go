// Package monitoring tests the chart's PrometheusRule and Grafana dashboard
// with Prometheus's own libraries: the rules parse and validate as
// Prometheus loads them, each alert is evaluated by Prometheus's rule
// engine on the series scraped from the controller during a sandbox run
// (test/e2e/imagecache, TestAlertsOnScrapedSeries), and the dashboard's
// queries parse and name only series the controller serves.
//
// It is a module of its own (see go.mod), so the product never builds
// against Prometheus's dependencies. Run it with `make test-monitoring`.
package monitoring
