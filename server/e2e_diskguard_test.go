package server_test

import (
	"strings"
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
	"github.com/narad-io/storage/server"
)

// (The floor on a real full disk, a tmpfs in the daemon's own mount
// namespace, is cmd/narad-storaged's TestE2E_TheFloorOnARealFullDisk.)

// TestE2E_FreeSpaceFloor: with a floor above what the disk has, produce
// is refused 507 no_space with nothing written (the high watermark stays
// 0), and the gauges say why.
func TestE2E_FreeSpaceFloor(t *testing.T) {
	d := startNode(t, t.TempDir(), func(c *server.Config) { c.MinFreeBytes = 18000000000000000000 })
	e2etest.Expect(t, d.req("PUT", "/v1/topics/full", map[string]any{"partitions": 1}), 201, "")
	r := d.req("POST", "/v1/topics/full/partitions/0/records", `{"records":[{"value":"x"}]}`)
	expectMessage(t, r, 507, "no_space", "floor")
	var f e2etest.Fetched
	d.req("GET", "/v1/topics/full/partitions/0/records?offset=0", nil).JSON(t, &f)
	if f.HighWatermark != 0 {
		t.Fatalf("a refused produce left a high watermark of %d", f.HighWatermark)
	}
	metrics := string(d.req("GET", "/metrics", nil).Body)
	if !strings.Contains(metrics, "narad_disk_floor_bytes{data_dir=") || !strings.Contains(metrics, "narad_disk_free_bytes{data_dir=") {
		t.Fatal("the disk gauges are missing")
	}
	if err := d.stop(); err != nil {
		t.Fatalf("a clean stop: %v\n%s", err, d.log())
	}
}
