package server_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/server"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// TestE2E_Metrics: every metric the design names is exposed from the
// start (every errors_total kind at zero); the exposition passes promlint
// (but for the design's own names); HTTP requests are counted and timed by
// route and code; produce and fetch are counted per topic; each
// partition's high watermark is a gauge.
func TestE2E_Metrics(t *testing.T) {
	d := startNode(t, t.TempDir(), func(c *server.Config) { c.AccessLog = true })
	first := string(d.req("GET", "/metrics", nil).Body)
	if !d.waitLog(`"msg":"request","method":"GET","path":"/metrics","route":"GET /metrics","status":200`) {
		t.Fatalf("the access log logged no line for the scrape:\n%s", d.log())
	}
	for _, kind := range []string{"commit_failed", "fsync_poisoned", "hwm_file", "read_corrupt", "retention_unlink", "write_failed"} {
		e2etest.ExpectMetric(t, first, `errors_total{component="storage",kind="`+kind+`"}`, 0)
	}
	for _, series := range []string{
		"narad_reaper_restarts", "narad_cold_retention_swept_total", "narad_cold_retention_panics_total",
		`narad_storage_retention_deleted_bytes_total{reason="age"}`, `narad_storage_retention_deleted_records_total{reason="age"}`,
		"narad_storage_written_frame_bytes_total", "narad_storage_read_record_bytes_total",
	} {
		e2etest.ExpectMetric(t, first, series, 0)
	}

	problems, err := promlint.New(bytes.NewReader([]byte(first))).Lint()
	if err != nil {
		t.Fatal(err)
	}
	designNames := map[string]bool{"errors_total": true} // named by the design, kept as named
	for _, p := range problems {
		if !designNames[p.Metric] && !strings.HasSuffix(p.Metric, "_restarts") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}

	e2etest.Expect(t, d.req("PUT", "/v1/topics/orders", map[string]any{"partitions": 2}), 201, "")
	for range 2 {
		e2etest.Expect(t, d.req("POST", "/v1/topics/orders/partitions/1/records", `{"records":[{"value":"abc"},{"key":"k","value":"de"}]}`), 200, "")
	}
	e2etest.Expect(t, d.req("GET", "/v1/topics/orders/partitions/1/records?offset=1", nil), 200, "")
	e2etest.Expect(t, d.req("GET", "/nowhere", nil), 404, "not_found")
	after := string(d.req("GET", "/metrics", nil).Body)
	const produce = `route="POST /v1/topics/{topic}/partitions/{p}/records"`
	e2etest.ExpectMetric(t, after, `narad_http_requests_total{code="200",`+produce+`}`, 2)
	e2etest.ExpectMetric(t, after, `narad_http_request_duration_seconds_count{`+produce+`}`, 2)
	e2etest.ExpectMetric(t, after, `narad_http_requests_total{code="201",route="PUT /v1/topics/{topic}"}`, 1)
	e2etest.ExpectMetric(t, after, `narad_http_requests_total{code="404",route="unmatched"}`, 1)
	e2etest.ExpectMetric(t, after, `narad_topic_produced_records_total{topic="orders"}`, 4)
	e2etest.ExpectMetric(t, after, `narad_topic_produced_bytes_total{topic="orders"}`, 2*6)
	e2etest.ExpectMetric(t, after, `narad_topic_fetched_records_total{topic="orders"}`, 3)
	e2etest.ExpectMetric(t, after, `narad_topic_fetched_bytes_total{topic="orders"}`, 6+3) // "de"+"k", "abc", "de"+"k"
	e2etest.ExpectMetric(t, after, `narad_partition_high_watermark{partition="1",topic="orders"}`, 4)
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}
