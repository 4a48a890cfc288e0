package e2etest

import (
	"strconv"
	"strings"
	"testing"
)

// MetricValue is the value of one series in a /metrics exposition (its
// name and labels exactly as exposed), and whether it is there.
func MetricValue(exposition, series string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// ExpectMetric fails the test unless series is in exposition with the
// value want.
func ExpectMetric(t testing.TB, exposition, series string, want float64) {
	t.Helper()
	got, ok := MetricValue(exposition, series)
	if !ok || got != want {
		t.Fatalf("%s = %v (present %v), want %v", series, got, ok, want)
	}
}
