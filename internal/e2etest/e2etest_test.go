package e2etest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB whose Fatal and Fatalf record the failure and
// end the goroutine, as a test's would, without failing the real test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(f string, args ...any) {
	r.failed = fmt.Sprintf(f, args...)
	runtime.Goexit()
}

// failure runs check on a recorder in a goroutine of its own, and returns
// what it failed with ("" if it did not).
func failure(t *testing.T, check func(testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.failed
}

// TestExpect_FailsOnAnotherStatusOrCode: Expect passes an answer with the
// status and code asked for, and fails one with another status, another
// code, or a body that is no error answer: the e2e tests' checks rest on it.
func TestExpect_FailsOnAnotherStatusOrCode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/plain" {
			w.Write([]byte("not json"))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"code":"topic_not_found","message":"no such topic"}}`))
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	a := API{Base: srv.URL, HTTP: hc}
	r := a.Req(t, "GET", "/v1/topics/x", nil)
	if got := failure(t, func(tb testing.TB) { Expect(tb, r, 404, "topic_not_found") }); got != "" {
		t.Fatalf("the answer asked for failed: %s", got)
	}
	for name, check := range map[string]func(testing.TB){
		"another status":  func(tb testing.TB) { Expect(tb, r, 200, "") },
		"another code":    func(tb testing.TB) { Expect(tb, r, 404, "partition_not_found") },
		"no error answer": func(tb testing.TB) { Expect(tb, a.Req(tb, "GET", "/plain", nil), 200, "topic_not_found") },
	} {
		if failure(t, check) == "" {
			t.Errorf("%s: Expect passed", name)
		}
	}
}

// TestMetricValue_ReadsOneSeriesExactly: a series is found by its name
// and labels exactly as exposed, not by a prefix of them.
func TestMetricValue_ReadsOneSeriesExactly(t *testing.T) {
	exposition := "# TYPE a counter\na_total{kind=\"x\"} 3\na_total_more 9\nb 1.5\n"
	for series, want := range map[string]float64{`a_total{kind="x"}`: 3, "b": 1.5} {
		if got, ok := MetricValue(exposition, series); !ok || got != want {
			t.Errorf("%s: %v %v, want %v", series, got, ok, want)
		}
	}
	for _, absent := range []string{"a_total", `a_total{kind="y"}`, "c"} {
		if _, ok := MetricValue(exposition, absent); ok {
			t.Errorf("%s found in %q", absent, exposition)
		}
	}
	if failure(t, func(tb testing.TB) { ExpectMetric(tb, exposition, "b", 2) }) == "" {
		t.Error("ExpectMetric passed a value other than the one exposed")
	}
}
