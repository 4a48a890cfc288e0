package main

import (
	"testing"

	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_CLICursorConsume: consume --cursor prints a partition through a
// cursor and resumes where it stood on the next run; a cursor made
// --from latest prints only what commits after it; --from latest without
// a cursor starts at the high watermark.
func TestE2E_CLICursorConsume(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	e2etest.Expect(t, d.req("PUT", "/v1/topics/c", map[string]any{"partitions": 1}), 201, "")
	produce := func(values ...string) {
		t.Helper()
		var recs []map[string]string
		for _, v := range values {
			recs = append(recs, map[string]string{"value": v})
		}
		e2etest.Expect(t, d.req("POST", "/v1/topics/c/partitions/0/records", map[string]any{"records": recs}), 200, "")
	}
	produce("a", "b", "c")
	run := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, "", append([]string{"consume", "--addr", d.addr, "--topic", "c"}, args...)...)
		if code != 0 {
			t.Fatalf("consume %v: exit %d, %s", args, code, errOut)
		}
		return out
	}
	if out := run("--cursor", "audit"); out != "0\t0\t\ta\n0\t1\t\tb\n0\t2\t\tc\n" {
		t.Fatalf("first run: %q", out)
	}
	if out := run("--cursor", "tail", "--from", "latest"); out != "" {
		t.Fatalf("a latest cursor's first run: %q", out)
	}
	produce("d", "e")
	if out := run("--cursor", "audit"); out != "0\t3\t\td\n0\t4\t\te\n" {
		t.Fatalf("second run: %q, want it to resume at 3", out)
	}
	if out := run("--cursor", "tail"); out != "0\t3\t\td\n0\t4\t\te\n" {
		t.Fatalf("the latest cursor: %q", out)
	}
	if out := run("--from", "latest"); out != "" {
		t.Fatalf("--from latest: %q", out)
	}
	if _, _, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "c", "--cursor", "x", "--from", "3"); code != 2 {
		t.Fatalf("--cursor with --from an offset: exit %d, want 2", code)
	}
}
