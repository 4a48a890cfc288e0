package main

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/internal/e2etest"
)

// TestE2E_CLIQueueConsumeFollowsTheTopic: consume --queue --follow
// leases, prints and acks every record of every partition, then what
// commits later as it commits, and ends at an interrupt, exit 0, with
// every record acked and none left leased.
func TestE2E_CLIQueueConsumeFollowsTheTopic(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	topicOfThree(t, d, "t")
	cmd := exec.CommandContext(beforeDeadline(t), daemonBinary, "consume", "--addr", d.addr, "--topic", "t", "--queue", "--follow")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = quitDelay
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			err := cmd.Wait() // errb is whole once Wait returns
			t.Fatalf("consume --queue --follow ended (%v, %v):\n%s", lines.Err(), err, errb.String())
		}
		return lines.Text()
	}
	var first []string
	for range 6 {
		first = append(first, next())
	}
	slices.Sort(first)
	if want := []string{"0\t0\t\ta0", "0\t1\t\ta1", "1\t0\tk\tb0", "2\t0\t\tc0", "2\t1\t\tc1", "2\t2\t\tc2"}; !slices.Equal(first, want) {
		t.Fatalf("what was there: %q, want %q", first, want)
	}
	e2etest.Expect(t, d.req("POST", "/v1/topics/t/partitions/1/records", map[string]any{"records": []map[string]string{{"value": "late"}}}), 200, "")
	if got := next(); got != "1\t1\t\tlate" {
		t.Fatalf("following, a record to partition 1: %q", got)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume --queue --follow after SIGINT: %v, %s", err, errb.String())
	}
	c, err := client.New(d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for p, n := range []int64{2, 2, 3} {
		st, err := c.Consumer(context.Background(), "t", p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Frontier != n || st.Lag != 0 || st.Leased != 0 {
			t.Fatalf("partition %d after consume --queue --follow: %+v; want its %d records acked, none leased", p, st, n)
		}
	}
}
