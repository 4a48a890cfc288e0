package runtime

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// markerOpens counts the opens of a topic's two marker files on d from
// now on; stop removes the hook.
func markerOpens(d *sim.Disk, topic string) (count func() int, stop func()) {
	dir := filepath.Join(dataDir, wire.TopicsDirName, topic)
	var mu sync.Mutex
	n := 0
	d.SetHook(func(c sim.Call) error {
		if c.Op == sim.OpOpen && filepath.Dir(c.Path) == dir &&
			(filepath.Base(c.Path) == wire.IncarnationFileName || filepath.Base(c.Path) == wire.IncarnationCopyFileName) {
			mu.Lock()
			n++
			mu.Unlock()
		}
		return nil
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}, func() { d.SetHook(nil) }
}

// TestIncarnation_AMatchIsRememberedWhileTheTopicHasALogOpen: once an
// open found both markers naming the record's incarnation, the topic's
// next opens read neither again while one of its logs stays open; once
// its last log closes, the next open reads both again.
func TestIncarnation_AMatchIsRememberedWhileTheTopicHasALogOpen(t *testing.T) {
	d := newTestDisk(t, 1)
	n := startNode(t, d, Config{})
	if _, _, err := n.CreateTopic(bg, "orders", 4, Retention{}); err != nil {
		t.Fatal(err)
	}
	// The first open stamps the new directory; a stamp is not remembered,
	// the match the second open reads is.
	for p := range 2 {
		if _, err := n.Produce(bg, "orders", p, recs("orders", p, 0, 1)); err != nil {
			t.Fatal(err)
		}
	}
	count, stop := markerOpens(d, "orders")
	defer stop()
	if _, err := n.Produce(bg, "orders", 2, recs("orders", 2, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 0 {
		t.Fatalf("an open while the topic has a log open opened the markers %d times, want 0", got)
	}
	for p := range 3 {
		if err := n.reg.CloseLive(key("orders", p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Produce(bg, "orders", 3, recs("orders", 3, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 2 {
		t.Fatalf("an open after the topic's last log closed opened the markers %d times, want 2 (the marker and its copy)", got)
	}
}

// TestIncarnation_EveryChangeOfTheDirectoryForgetsTheMatch: a marker
// write, a quarantine and a purge each forget a remembered match, even
// with the record unchanged and a log of the topic open before them: the
// next open checks the directory again, and stamps what it serves. Left
// remembered, the open would serve a directory with another incarnation's
// marker, or none.
func TestIncarnation_EveryChangeOfTheDirectoryForgetsTheMatch(t *testing.T) {
	for name, change := range map[string]func(n *testNode, t *supervisor.GuardedTopic, rec TopicRecord) error{
		"another id written": func(n *testNode, _ *supervisor.GuardedTopic, rec TopicRecord) error {
			return n.writeMarker(filepath.Join(n.topicsDir, rec.Name), "0123456789abcdef")
		},
		"quarantine": func(n *testNode, t *supervisor.GuardedTopic, rec TopicRecord) error {
			return n.quarantine(t, rec, rec.Incarnation)
		},
		"purge": func(n *testNode, t *supervisor.GuardedTopic, rec TopicRecord) error {
			return n.purgeLocked(t, rec)
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := newTestDisk(t, 1)
			n := startNode(t, d, Config{})
			rec, _, err := n.CreateTopic(bg, "orders", 3, Retention{})
			if err != nil {
				t.Fatal(err)
			}
			for p := range 2 { // the first stamps, the second reads the match
				if _, err := n.Produce(bg, "orders", p, recs("orders", p, 0, 1)); err != nil {
					t.Fatal(err)
				}
			}
			if !n.vouched.vouches("orders", rec.Incarnation) {
				t.Fatal("the first open's match is not remembered")
			}
			err = n.withTopic("orders", func(g *supervisor.GuardedTopic) error { return change(n, g, rec) })
			if err != nil {
				t.Fatal(err)
			}
			count, stop := markerOpens(d, "orders")
			defer stop()
			if _, err := n.Produce(bg, "orders", 2, recs("orders", 2, 0, 1)); err != nil {
				t.Fatal(err)
			}
			if count() == 0 {
				t.Fatal("the open after the change read no marker")
			}
			dir := filepath.Join(dataDir, wire.TopicsDirName, "orders")
			for _, f := range []string{wire.IncarnationFileName, wire.IncarnationCopyFileName} {
				if b, err := d.Contents(filepath.Join(dir, f)); err != nil || strings.TrimSpace(string(b)) != string(rec.Incarnation) {
					t.Fatalf("%s after the open: %q %v, want the record's %s", f, b, err, rec.Incarnation)
				}
			}
			if ok, err := vfs.Exists(d, filepath.Join(dir, "p00002")); !ok || err != nil {
				t.Fatalf("partition 2 not in the checked directory: %v %v", ok, err)
			}
		})
	}
}
