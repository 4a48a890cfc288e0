package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/narad-io/storage/internal/e2etest"
)

// topicOfThree makes topic t of three partitions: a0 a1 on 0, b0 (key k)
// on 1, c0 c1 c2 on 2.
func topicOfThree(t *testing.T, d *daemon, name string) {
	t.Helper()
	e2etest.Expect(t, d.req("PUT", "/v1/topics/"+name, map[string]any{"partitions": 3}), 201, "")
	for p, recs := range [][]map[string]string{
		{{"value": "a0"}, {"value": "a1"}},
		{{"key": "k", "value": "b0"}},
		{{"value": "c0"}, {"value": "c1"}, {"value": "c2"}},
	} {
		e2etest.Expect(t, d.req("POST", fmt.Sprintf("/v1/topics/%s/partitions/%d/records", name, p), map[string]any{"records": recs}), 200, "")
	}
}

// inPartitionOrder checks that out's lines of each partition (the first
// field, before sep) are in the order of want's, and that the lines are
// want's, in some order of partitions.
func inPartitionOrder(t *testing.T, what, out string, want []string, sep string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if out == "" {
		got = nil
	}
	byPartition := func(lines []string) map[string][]string {
		m := map[string][]string{}
		for _, l := range lines {
			p, _, _ := strings.Cut(l, sep)
			m[p] = append(m[p], l)
		}
		return m
	}
	if fmt.Sprint(byPartition(got)) != fmt.Sprint(byPartition(want)) {
		t.Fatalf("%s:\n%s\nwant, each partition in this order:\n%s", what, out, strings.Join(want, "\n"))
	}
}

// TestE2E_CLIConsumeWholeTopic: consume reads every partition by
// default, each line naming its partition (text, --json, --format);
// --partition pins one; --from starts every partition at latest, at an
// offset (a partition with fewer records at its end), at an offset each,
// at a time; --queue leases from every
// partition; what does not go together is a usage error.
func TestE2E_CLIConsumeWholeTopic(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	topicOfThree(t, d, "t")
	consume := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, "", append([]string{"consume", "--addr", d.addr, "--topic", "t"}, args...)...)
		if code != 0 || errOut != "" {
			t.Fatalf("consume %v: exit %d, %q %s", args, code, out, errOut)
		}
		return out
	}
	all := []string{"0\t0\t\ta0", "0\t1\t\ta1", "1\t0\tk\tb0", "2\t0\t\tc0", "2\t1\t\tc1", "2\t2\t\tc2"}
	inPartitionOrder(t, "consume", consume(), all, "\t")
	if out := consume("--partition", "2"); out != "2\t0\t\tc0\n2\t1\t\tc1\n2\t2\t\tc2\n" {
		t.Fatalf("--partition 2: %q", out)
	}

	var partitions []int
	for _, l := range strings.Split(strings.TrimSpace(consume("--json")), "\n") {
		var line struct {
			Partition *int   `json:"partition"`
			Offset    int64  `json:"offset"`
			Value     string `json:"value"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil || line.Partition == nil {
			t.Fatalf("--json line %q: %v", l, err)
		}
		partitions = append(partitions, *line.Partition)
	}
	sort.Ints(partitions)
	if fmt.Sprint(partitions) != "[0 0 1 2 2 2]" {
		t.Fatalf("--json: the lines' partitions %v", partitions)
	}
	out := consume("--partition", "1", "--format", `%t/%p@%o %k=%s (%K+%S bytes) %T 100%%\n`)
	if !regexp.MustCompile(`^t/1@0 k=b0 \(1\+2 bytes\) [0-9]{13} 100%\n$`).MatchString(out) {
		t.Fatalf("--format: %q", out)
	}

	if out := consume("--from", "latest"); out != "" {
		t.Fatalf("--from latest: %q", out)
	}
	// Partition 1 holds one record, 0 two: offset 2 is past the one's
	// high watermark and at the other's; both are read to their end.
	if out := consume("--from", "2"); out != "2\t2\t\tc2\n" {
		t.Fatalf("--from 2: %q", out)
	}
	inPartitionOrder(t, "--from 0:1,1:0,2:2", consume("--from", "0:1,1:0,2:2"), []string{"0\t1\t\ta1", "1\t0\tk\tb0", "2\t2\t\tc2"}, "\t")
	if out := consume("--partition", "2", "--from", "2:1"); out != "2\t1\t\tc1\n2\t2\t\tc2\n" {
		t.Fatalf("--partition 2 --from 2:1: %q", out)
	}
	inPartitionOrder(t, "--from a time before", consume("--from", "2000-01-01T00:00:00Z"), all, "\t")
	if out := consume("--from", "2999-01-01T00:00:00Z"); out != "" {
		t.Fatalf("--from a time after every record: %q", out)
	}
	inPartitionOrder(t, "--queue --no-ack", consume("--queue", "--no-ack", "--format", `%p:%o\n`), []string{"0:0", "0:1", "1:0", "2:0", "2:1", "2:2"}, ":")

	for _, bad := range [][]string{
		{"--json", "--format", "%s"}, {"--format", "%x"}, {"--format", `\q`}, {"--from", "0:1,0:2"},
		{"--partition", "1", "--from", "0:1"}, {"--from", "1:"}, {"--cursor", "c", "--from", "0:1,1:1,2:1"},
	} {
		if out, errOut, code := cli(t, "", append([]string{"consume", "--addr", d.addr, "--topic", "t"}, bad...)...); code != 2 || out != "" || errOut == "" {
			t.Fatalf("consume %v: exit %d, %q %q; want a usage error", bad, code, out, errOut)
		}
	}
	if _, errOut, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "t", "--from", "0:1,2:1"); code != 1 || !strings.Contains(errOut, "no offset for partition 1") {
		t.Fatalf("--from naming two of three partitions: exit %d, %s", code, errOut)
	}
	for _, from := range [][]string{{"--from", "0:0,1:2,2:0"}, {"--partition", "1", "--from", "2"}} { // an offset of partition 1's own
		if _, errOut, code := cli(t, "", append([]string{"consume", "--addr", d.addr, "--topic", "t"}, from...)...); code != 1 || !strings.Contains(errOut, "offset_beyond_high_watermark") {
			t.Fatalf("consume %v, past partition 1's one record: exit %d, %s", from, code, errOut)
		}
	}
	if _, errOut, code := cli(t, "", "consume", "--addr", d.addr, "--topic", "t", "--partition", "3"); code != 1 || !strings.Contains(errOut, "partitions 0 to 2") {
		t.Fatalf("--partition 3 of three: exit %d, %s", code, errOut)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}

// TestE2E_CLIConsumeHelpSaysPartitionPins: consume's --partition pins one
// partition, every one read without it.
func TestE2E_CLIConsumeHelpSaysPartitionPins(t *testing.T) {
	_, errOut, code := cli(t, "", "consume", "--help")
	if code != 0 || !strings.Contains(errOut, "pin one partition (default: every partition)") {
		t.Fatalf("consume --help: exit %d\n%s", code, errOut)
	}
}

// TestE2E_CLIConsumeFollowsEveryPartition: consume --follow prints what
// commits to any partition as it commits, and ends at an interrupt,
// exit 0. A line that never comes fails the test before go test's own
// timeout, with consume's goroutines (SIGQUIT's dump) in the failure.
func TestE2E_CLIConsumeFollowsEveryPartition(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	topicOfThree(t, d, "t")
	cmd := exec.CommandContext(beforeDeadline(t), daemonBinary, "consume", "--addr", d.addr, "--topic", "t", "--follow")
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
			t.Fatalf("consume --follow ended (%v, %v):\n%s", lines.Err(), err, errb.String())
		}
		return lines.Text()
	}
	var first []string
	for range 6 {
		first = append(first, next())
	}
	inPartitionOrder(t, "what was there", strings.Join(first, "\n")+"\n", []string{"0\t0\t\ta0", "0\t1\t\ta1", "1\t0\tk\tb0", "2\t0\t\tc0", "2\t1\t\tc1", "2\t2\t\tc2"}, "\t")
	for _, p := range []int{2, 0, 1} {
		e2etest.Expect(t, d.req("POST", fmt.Sprintf("/v1/topics/t/partitions/%d/records", p), map[string]any{"records": []map[string]string{{"value": "late"}}}), 200, "")
		if got, want := next(), fmt.Sprintf("%d\t%d\t\tlate", p, []int{2, 1, 3}[p]); got != want {
			t.Fatalf("following, a record to partition %d: %q, want %q", p, got, want)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume --follow after SIGINT: %v, %s", err, errb.String())
	}
}

// quitDelay is what a command ended by beforeDeadline's context is given
// to dump its goroutines (SIGQUIT) and exit before it is killed and its
// pipes closed; deadlineMargin leaves that and the failure's report room
// before go test's timeout.
const (
	quitDelay      = 5 * time.Second
	deadlineMargin = 2 * quitDelay
)

// beforeDeadline is a context that ends deadlineMargin before the test's
// deadline (never, when go test runs without a timeout).
func beforeDeadline(t *testing.T) context.Context {
	deadline, ok := t.Deadline()
	if !ok {
		return t.Context()
	}
	ctx, cancel := context.WithDeadline(t.Context(), deadline.Add(-deadlineMargin))
	t.Cleanup(cancel)
	return ctx
}

// TestE2E_CLIConsumeCursorCoversTheTopic: consume --cursor reads every
// partition through the cursor and commits each past what it printed,
// leaving no lag; the next run prints only what came since; with
// --partition it reads and commits that partition alone.
func TestE2E_CLIConsumeCursorCoversTheTopic(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	topicOfThree(t, d, "t")
	consume := func(args ...string) string {
		t.Helper()
		out, errOut, code := cli(t, "", append([]string{"consume", "--addr", d.addr, "--topic", "t"}, args...)...)
		if code != 0 || errOut != "" {
			t.Fatalf("consume %v: exit %d, %q %s", args, code, out, errOut)
		}
		return out
	}
	lags := func(cursor string) []int64 {
		t.Helper()
		var cur struct {
			Partitions []struct {
				Partition int   `json:"partition"`
				Lag       int64 `json:"lag"`
			} `json:"partitions"`
		}
		r := d.req("GET", "/v1/topics/t/cursors/"+cursor, nil)
		e2etest.Expect(t, r, 200, "")
		r.JSON(t, &cur)
		out := make([]int64, 3)
		for _, p := range cur.Partitions {
			out[p.Partition] = p.Lag
		}
		return out
	}
	inPartitionOrder(t, "--cursor c1", consume("--cursor", "c1"), []string{"0\t0\t\ta0", "0\t1\t\ta1", "1\t0\tk\tb0", "2\t0\t\tc0", "2\t1\t\tc1", "2\t2\t\tc2"}, "\t")
	if got := lags("c1"); !slices.Equal(got, []int64{0, 0, 0}) {
		t.Fatalf("after consume --cursor c1 the cursor's lag is %v on each partition; want none left", got)
	}
	for _, p := range []int{1, 2} {
		e2etest.Expect(t, d.req("POST", fmt.Sprintf("/v1/topics/t/partitions/%d/records", p), map[string]any{"records": []map[string]string{{"value": "new"}}}), 200, "")
	}
	inPartitionOrder(t, "--cursor c1 again", consume("--cursor", "c1"), []string{"1\t1\t\tnew", "2\t3\t\tnew"}, "\t")
	if out := consume("--cursor", "c2", "--partition", "2"); out != "2\t0\t\tc0\n2\t1\t\tc1\n2\t2\t\tc2\n2\t3\t\tnew\n" {
		t.Fatalf("--cursor c2 --partition 2: %q", out)
	}
	if got := lags("c2"); !slices.Equal(got, []int64{2, 2, 0}) {
		t.Fatalf("--partition 2 through c2 left lags %v; want partition 2's alone read", got)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.log())
	}
}
