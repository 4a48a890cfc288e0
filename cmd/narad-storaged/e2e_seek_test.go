package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_CLIConsumeFromTime: consume --from TIME starts at the first
// record committed at or after TIME. (The offset endpoint and a fetch
// with at_ms are package server's TestE2E_SeekByTime.)
func TestE2E_CLIConsumeFromTime(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	ctx := context.Background()
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all, firstAt := e2etest.CommittedOneByOne(t, ctx, c, "clock", 20)
	at := all.Records[10].CommittedAt
	out, errOut, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "clock", "--from", at.Format(time.RFC3339Nano))
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("0\t%d\t\t", firstAt(at))) {
		t.Fatalf("consume --from %s: exit %d, %q %s", at.Format(time.RFC3339Nano), code, out, errOut)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}
