package clustertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/server"
	"github.com/narad-io/storage/wire"
)

// produceEach produces n records into every partition of topic through
// the nodes in turn (partition p through nodes[p%len]), values
// "<topic>/<p>/<i>" from i = from.
func produceEach[P peer](t *testing.T, nodes []P, topic string, partitions, from, n int) {
	t.Helper()
	for p := range partitions {
		var recs []client.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, client.Record{Value: fmt.Appendf(nil, "%s/%d/%d", topic, p, i)})
		}
		through := nodes[p%len(nodes)].at()
		res, err := through.client().Produce(bg, topic, p, recs)
		if err != nil {
			t.Fatalf("produce into %s/%d through %s: %v", topic, p, through.id, err)
		}
		if res.BaseOffset != int64(from) {
			t.Fatalf("produce into %s/%d: base offset %d, want %d", topic, p, res.BaseOffset, from)
		}
	}
}

// fetchAll reads every record of a partition through node d and checks
// they are the values produceEach gave, n of them.
func fetchAll(t *testing.T, node peer, topic string, p, n int) {
	t.Helper()
	d := node.at()
	got, err := d.client().Fetch(bg, topic, p, 0, client.FetchOptions{})
	if err != nil {
		t.Fatalf("fetch %s/%d through %s: %v", topic, p, d.id, err)
	}
	if len(got.Records) != n || got.HighWatermark != int64(n) {
		t.Fatalf("fetch %s/%d through %s: %d records, high watermark %d; want %d", topic, p, d.id, len(got.Records), got.HighWatermark, n)
	}
	for i, r := range got.Records {
		if want := fmt.Sprintf("%s/%d/%d", topic, p, i); string(r.Value) != want || r.Offset != int64(i) {
			t.Fatalf("%s/%d record %d: offset %d value %q, want %q", topic, p, i, r.Offset, r.Value, want)
		}
	}
}

// partitionDirs lists the partition directories a node holds of topic.
func partitionDirs(t *testing.T, d peer, topic string) []int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.at().dataDir, wire.TopicsDirName, topic))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		if p, err := wire.ParsePartitionDirName(e.Name()); err == nil && e.IsDir() {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestCluster_TopicsSpreadAndAnyNodeServes: three nodes on one etcd. A
// topic made through one node has its partitions spread over all three;
// produce and fetch through any node reach the owner (the client follows
// the 421s); a node asked directly for another's partition answers 421
// with the owner's id and address; each node holds the directories of
// its own partitions only; the description names every owner.
func TestCluster_TopicsSpreadAndAnyNodeServes(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b", "c")
	byID := map[string]*node{}
	for _, d := range nodes {
		byID[d.id] = d
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	if _, created, err := nodes[0].client().CreateTopic(bg, "orders", 12, client.Retention{}); err != nil || !created {
		t.Fatalf("create through a: %v, %v", created, err)
	}
	owner := owners(t, watch, heard, "orders", 12)
	mine := map[string][]int{}
	for p, o := range owner {
		mine[o] = append(mine[o], p)
	}
	if len(mine) != 3 {
		t.Fatalf("12 partitions over nodes a, b, c: %v", mine)
	}

	produceEach(t, nodes, "orders", 12, 0, 5)
	for p := range 12 {
		fetchAll(t, nodes[(p+1)%3], "orders", p, 5)
	}
	for p, o := range owner {
		other := nodes[0]
		if other.id == o {
			other = nodes[1]
		}
		status, body := other.get(fmt.Sprintf("/v1/topics/orders/partitions/%d/records?offset=0", p))
		var answer struct {
			Error struct{ Code string }
			Owner struct {
				NodeID string `json:"node_id"`
				Addr   string
			}
		}
		if err := json.Unmarshal(body, &answer); err != nil || status != http.StatusMisdirectedRequest || answer.Error.Code != "not_owner" ||
			answer.Owner.NodeID != o || answer.Owner.Addr != byID[o].addr {
			t.Fatalf("partition %d (%s's) asked of %s: %d %s; want 421 naming %s at %s", p, o, other.id, status, body, o, byID[o].addr)
		}
	}
	for p, o := range owner { // a consume naming another node's partition, too
		other := nodes[0]
		if other.id == o {
			other = nodes[1]
		}
		resp, err := http.Post(other.addr+"/v1/topics/orders/consume", "application/json", strings.NewReader(fmt.Sprintf(`{"partition": %d}`, p)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Fatalf("a consume of partition %d (%s's) asked of %s: %d, want 421", p, o, other.id, resp.StatusCode)
		}
	}
	for _, d := range nodes {
		if got := partitionDirs(t, d, "orders"); !slices.Equal(got, mine[d.id]) {
			t.Fatalf("node %s holds partitions %v of orders; it owns %v", d.id, got, mine[d.id])
		}
	}
	desc, err := nodes[2].client().Topic(bg, "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range desc.Partitions {
		o := owner[p.Partition]
		remote := o != "c"
		if p.Owner == nil || p.Owner.NodeID != o || p.Owner.Addr != byID[o].addr || p.Remote != remote || (!remote && p.HighWatermark != 5) {
			t.Fatalf("c describes partition %d (%s's) as %+v (owner %+v)", p.Partition, o, p, p.Owner)
		}
	}
}

// TestCluster_ANodeBackFromDownQuarantinesItsStaleCopy: a topic deleted
// and made again while one of its owners was down goes to the live
// nodes; the node, back, sets its copy of the deleted incarnation aside
// at start (quarantined, never served), and the topic serves only the new
// incarnation's records through every node.
func TestCluster_ANodeBackFromDownQuarantinesItsStaleCopy(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b", "c")
	a, c := nodes[0], nodes[2]
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	old, _, err := a.client().CreateTopic(bg, "orders", 6, client.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	owners(t, watch, heard, "orders", 6)
	produceEach(t, nodes, "orders", 6, 0, 3)
	if len(partitionDirs(t, c, "orders")) == 0 {
		t.Fatal("fixture: c owns none of the topic's partitions")
	}

	c.stop() // leaves the cluster: the recreated topic goes to a and b
	if err := a.client().DeleteTopic(bg, "orders"); err != nil {
		t.Fatal(err)
	}
	fresh, _, err := a.client().CreateTopic(bg, "orders", 6, client.Retention{})
	if err != nil || fresh.Incarnation == old.Incarnation {
		t.Fatalf("recreate: %+v, %v", fresh, err)
	}
	for p, o := range owners(t, watch, heard, "orders", 6) {
		if o == "c" {
			t.Fatalf("partition %d of the recreated topic went to c, which is down", p)
		}
	}
	for _, d := range nodes[:2] {
		d.waitApplied("orders", fresh.Incarnation, 6) // never produce into the old incarnation through a lagging node
	}
	produceEach(t, nodes[:2], "orders", 6, 0, 2)

	c.start() // back, it takes its share of the new incarnation by moves
	stale := filepath.Join(c.dataDir, wire.TopicsDirName, "orders.stale-"+old.Incarnation)
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("c's copy of the deleted incarnation was not quarantined: %v\n%s", err, c.log())
	}
	if b, err := os.ReadFile(filepath.Join(c.dataDir, wire.TopicsDirName, "orders", wire.IncarnationFileName)); err == nil && strings.TrimSpace(string(b)) != fresh.Incarnation {
		t.Fatalf("c's topic directory is incarnation %s, not the new %s", b, fresh.Incarnation)
	}
	for p := range 6 {
		fetchAll(t, nodes[p%3], "orders", p, 2) // through c too: it sends the client on
	}
}

// TestCluster_EtcdRestartedMidRun: with etcd down (for less than the
// nodes' fence horizon), every node keeps serving the partitions it owns
// and still sends clients to the owners it knows; once etcd is back,
// every node serves on with its lease renewed (or, when etcd took longer
// than the lease's TTL to answer, a new one), catches up, and a topic
// made then is spread and served.
func TestCluster_EtcdRestartedMidRun(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b", "c")
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	if _, _, err := nodes[0].client().CreateTopic(bg, "orders", 6, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owners(t, watch, heard, "orders", 6)
	produceEach(t, nodes, "orders", 6, 0, 2)

	caughtUp := make([]int, len(nodes))
	for i, d := range nodes {
		caughtUp[i] = d.logCount("metastore caught up with etcd")
	}
	te.stop()
	for _, d := range nodes {
		if !d.waitLog("metastore behind etcd") || !d.waitLog("cannot renew the cluster membership lease") {
			t.Fatalf("node %s never noticed etcd gone", d.id)
		}
	}
	produceEach(t, nodes, "orders", 6, 2, 3) // through non-owners too: each still knows the owners
	for p := range 6 {
		fetchAll(t, nodes[(p+2)%3], "orders", p, 5)
	}

	te.start()
	for i, d := range nodes {
		if !d.waitLogCount("metastore caught up with etcd", caughtUp[i]+1) ||
			!d.waitLog("cluster membership serving again") { // so a new topic is spread over all three
			t.Fatalf("node %s never caught up with etcd again", d.id)
		}
	}
	waitCaughtUp(t, watch, true)
	if _, _, err := nodes[1].client().CreateTopic(bg, "payments", 6, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	spread := map[string]bool{}
	for _, o := range owners(t, watch, heard, "payments", 6) {
		spread[o] = true
	}
	if len(spread) < 2 {
		t.Fatalf("the topic made after etcd came back went to %v only", spread)
	}
	produceEach(t, nodes, "payments", 6, 0, 1)
	for p := range 6 {
		fetchAll(t, nodes[(p+1)%3], "payments", p, 1)
		fetchAll(t, nodes[p%3], "orders", p, 5)
	}
}

// TestCluster_ADataDirectoryServesOnlyItsOwnNodeAndCluster: a data
// directory is never served as another node's, in another cluster, as a
// node alone's when a cluster's node served it (or the other way round),
// and a new directory never takes the id of a node that owns partitions:
// each would have the startup sweep take its topics for deleted ones, or
// serve a lost disk's partitions from offset 0 again. Each is refused at
// start, naming what is wrong: server.New answers datadir.ErrIdentity,
// and the daemon (a process: its exit code) exits 2.
func TestCluster_ADataDirectoryServesOnlyItsOwnNodeAndCluster(t *testing.T) {
	te := startEtcd(t)
	a := startNodes(t, te, "a")[0]
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	if _, _, err := a.client().CreateTopic(bg, "orders", 2, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owners(t, watch, heard, "orders", 2)
	produceEach(t, []*node{a}, "orders", 2, 0, 1)
	a.stop()

	alone := filepath.Join(t.TempDir(), "alone")
	b := startNodeWith(t, "alone", aloneConfig(alone))
	if _, _, err := b.client().CreateTopic(bg, "local", 1, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	b.stop()

	other := startEtcd(t) // another cluster's etcd, holding nothing yet
	for _, tc := range []struct {
		what string
		cfg  server.Config
		says string
	}{
		{"a cluster node's directory as a node alone", aloneConfig(a.dataDir), "is a cluster's node's (a;"},
		{"a cluster node's directory under another id", nodeConfig(te.socket, "z", a.dataDir), `is node "a"'s, not "z"`},
		{"a cluster node's directory on another etcd", nodeConfig(other.socket, "a", a.dataDir), "etcd holds no cluster"},
		{"a node alone's directory in a cluster", nodeConfig(te.socket, "y", alone), "has served a node alone"},
		{"a new directory under the id of a node owning partitions", nodeConfig(te.socket, "a", filepath.Join(t.TempDir(), "new")), `node id "a" owns 2 partitions`},
	} {
		if s, err := server.New(bg, tc.cfg); err == nil {
			s.Close()
			t.Fatalf("%s: served", tc.what)
		} else if !errors.Is(err, datadir.ErrIdentity) || !strings.Contains(err.Error(), tc.says) {
			t.Fatalf("%s: %v; want %v saying %q", tc.what, err, datadir.ErrIdentity, tc.says)
		}
		code, out := runToExit(t, serveArgs(tc.cfg)...)
		if logged, _ := json.Marshal(tc.says); code != 2 || !strings.Contains(out, strings.Trim(string(logged), `"`)) {
			t.Fatalf("%s: exit %d; want 2 and a log saying %s:\n%s", tc.what, code, logged, out)
		}
	}
	// Refused, and nothing lost: a, back as itself, serves its records.
	a.start()
	for p := range 2 {
		fetchAll(t, a, "orders", p, 1)
	}
}

// aloneConfig is a node alone's over dataDir, on a loopback port of its
// own choosing.
func aloneConfig(dataDir string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dataDir
	cfg.Listen = "127.0.0.1:0"
	cfg.DiskCheckBudget = 0 // tested in package server; every start here would pay it
	return cfg
}

// serveArgs are the daemon's arguments for what cfg sets of a node's
// directory, listener and cluster.
func serveArgs(cfg server.Config) []string {
	args := []string{"serve", "--listen", cfg.Listen, "--data-dir", cfg.DataDir, "--metastore", cfg.Metastore,
		"--disk-check-budget", time.Duration(cfg.DiskCheckBudget).String()}
	if cfg.NodeID != "" {
		args = append(args, "--node-id", cfg.NodeID)
	}
	return args
}

// TestCluster_AMoveUnderProduceLosesAndDuplicatesNothing: a partition
// moved to another node while a producer writes to it through a third:
// every acked record is on the new owner, once, in order, at consecutive
// offsets; records go on being acked after the move; the old owner drops
// its copy; the other partition is untouched.
func TestCluster_AMoveUnderProduceLosesAndDuplicatesNothing(t *testing.T) {
	te := startEtcd(t)
	nodes := make([]*node, 3)
	for i, id := range []string{"a", "b", "c"} {
		// Small segments: the move copies sealed ones before its freeze.
		// The default lease TTL: no node stops here, and a machine busy
		// enough to stall etcd's answers past 2 s would have a lease run
		// out mid-move (seen under load), the node answering the producer
		// 503 fenced, or the requested move cancelled as stranded.
		nodes[i] = startNode(t, te, id, filepath.Join(t.TempDir(), id), func(c *server.Config) {
			c.SegmentMaxBytes = 1024
			c.MemberTTL = server.Duration(10 * time.Second)
		})
	}
	byID := map[string]*node{}
	for _, d := range nodes {
		byID[d.id] = d
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	if _, _, err := nodes[0].client().CreateTopic(bg, "orders", 2, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owner := owners(t, watch, heard, "orders", 2)
	from := owner[0]
	to, via := "", ""
	for _, d := range nodes {
		switch {
		case d.id == from:
		case to == "":
			to = d.id
		default:
			via = d.id
		}
	}
	for i := range 10 {
		produceEach(t, nodes, "orders", 2, i*5, 5) // ten frames: several sealed segments
	}
	// Progress that moves with the partition: a queue consumer's acks (a
	// frontier and an acked-ahead offset) and a fan-out cursor's position.
	oldOwner := byID[from].client()
	if _, err := oldOwner.Ack(bg, "orders", 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12); err != nil {
		t.Fatal(err)
	}
	if _, _, err := oldOwner.CreateCursor(bg, "orders", "audit", client.Earliest); err != nil {
		t.Fatal(err)
	}
	if read, err := oldOwner.ReadCursor(bg, "orders", "audit", 0, client.CursorReadOptions{MaxRecords: 20}); err != nil || read.NextOffset != 20 {
		t.Fatalf("cursor read: %+v, %v", read, err)
	}

	// The producer: one record a call through a node that owns neither
	// end of the move, each acked value kept; a call answered "moving"
	// past the client's retries did nothing and is sent again.
	var acked []string
	moved := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		c := byID[via].client()
		after := 0
		for i := 50; ; i++ {
			v := fmt.Sprintf("orders/0/%d", i)
			for {
				_, err := c.Produce(bg, "orders", 0, []client.Record{{Value: []byte(v)}})
				if errors.Is(err, client.ErrMoving) {
					continue
				}
				if err != nil {
					produced <- err
					return
				}
				break
			}
			acked = append(acked, v)
			select {
			case <-moved:
				if after++; after == 50 {
					produced <- nil
					return
				}
			default:
			}
		}
	}()
	mv, err := byID[via].client().MovePartition(bg, "orders", 0, to)
	if err != nil {
		t.Fatal(err)
	}
	if mv.From != from || mv.To != to || mv.State != "requested" {
		t.Fatalf("move: %+v", mv)
	}
	heard.waitFor(t, "the move to complete", func() bool {
		o, _ := watch.Owner("orders", 0)
		return o == to && len(watch.Moves()) == 0
	})
	close(moved)
	if err := <-produced; err != nil {
		t.Fatalf("produce during the move: %v", err)
	}
	if !byID[from].waitLog("dropped this node's copy of a partition another node owns") {
		t.Fatal("the old owner never dropped its copy")
	}
	if got := partitionDirs(t, byID[from], "orders"); slices.Contains(got, 0) {
		t.Fatalf("the old owner still holds partition 0: %v", got)
	}
	// Every record, in as many fetches as it takes: how many were acked
	// grows with the move's time.
	var records []client.FetchedRecord
	hwm := int64(-1)
	for hwm < 0 || int64(len(records)) < hwm {
		got, err := nodes[0].client().Fetch(bg, "orders", 0, int64(len(records)), client.FetchOptions{MaxRecords: 10000})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Records) == 0 {
			break
		}
		records, hwm = append(records, got.Records...), got.HighWatermark
	}
	want := 50 + len(acked)
	if len(records) != want || hwm != int64(want) {
		t.Fatalf("the new owner holds %d records (high watermark %d); %d were acked", len(records), hwm, want)
	}
	for i, r := range records {
		if w := fmt.Sprintf("orders/0/%d", i); r.Offset != int64(i) || string(r.Value) != w {
			t.Fatalf("record %d: offset %d value %q, want %q", i, r.Offset, r.Value, w)
		}
	}
	segments, _ := filepath.Glob(filepath.Join(byID[to].dataDir, wire.TopicsDirName, "orders", "p00000", "*"+wire.SegmentFileSuffix))
	if len(segments) < 2 {
		t.Fatalf("the moved partition has %d segments; the test wants sealed ones copied before the freeze", len(segments))
	}
	newOwner := byID[to].client()
	if st, err := newOwner.Consumer(bg, "orders", 0); err != nil || st.Frontier != 10 || !slices.Equal(st.AckedAhead, []int64{12}) {
		t.Fatalf("the queue consumer's progress after the move: %+v, %v; want frontier 10, 12 acked ahead", st, err)
	}
	cur, err := newOwner.Cursor(bg, "orders", "audit")
	if err != nil || len(cur.Partitions) == 0 || cur.Partitions[0].Partition != 0 || cur.Partitions[0].Position != 20 {
		t.Fatalf("the cursor on the new owner: %+v, %v; want partition 0 at 20", cur, err)
	}
	fetchAll(t, nodes[2], "orders", 1, 50)
	t.Logf("moved %s -> %s under produce through %s: %d records acked during and after the move", from, to, via, len(acked))
}

// TestCluster_ANodeThatJoinsTakesItsShareAndADrainedOneGivesItsUp: a node
// that joins a running cluster is moved the partitions the placement now
// gives it, and a drained node has every partition moved off it; records
// stay whole through both.
func TestCluster_ANodeThatJoinsTakesItsShareAndADrainedOneGivesItsUp(t *testing.T) {
	te := startEtcd(t)
	nodes := startNodes(t, te, "a", "b")
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	if _, _, err := nodes[0].client().CreateTopic(bg, "orders", 6, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	ofA := 0 // what a ever gives away: its partitions, some to c, the rest at its drain
	for _, o := range owners(t, watch, heard, "orders", 6) {
		if o == "a" {
			ofA++
		}
	}
	produceEach(t, nodes, "orders", 6, 0, 3)

	settled := func(members []string) func() bool { // every partition where the placement from the owners now puts it
		before := make([]string, 6)
		for p := range before {
			before[p], _ = watch.Owner("orders", p)
		}
		want := placed("orders", before, members)
		return func() bool {
			if len(watch.Moves()) > 0 {
				return false
			}
			for p := range 6 {
				if o, _ := watch.Owner("orders", p); o != want[p] {
					return false
				}
			}
			return true
		}
	}
	joined := settled([]string{"a", "b", "c"})
	nodes = append(nodes, startNode(t, te, "c", filepath.Join(t.TempDir(), "c")))
	heard.waitFor(t, "c to take its share", joined)
	for p := range 6 {
		fetchAll(t, nodes[p%3], "orders", p, 3)
	}
	drained := settled([]string{"b", "c"})
	if err := nodes[1].client().Drain(bg, "a", true); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "a to be drained", drained)
	for p := range 6 {
		fetchAll(t, nodes[p%3], "orders", p, 3)
	}
	if !nodes[0].waitLogCount("dropped this node's copy of a partition another node owns", ofA) {
		t.Fatal("the drained node never dropped its copies")
	}
	if got := partitionDirs(t, nodes[0], "orders"); len(got) != 0 {
		t.Fatalf("the drained node still holds partitions %v", got)
	}
}
