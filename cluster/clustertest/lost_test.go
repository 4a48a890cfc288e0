package clustertest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/server"
	"github.com/narad-io/storage/wire"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// logWatch is a logger whose entries a test waits for.
type logWatch struct {
	logs *observer.ObservedLogs
	wake chan struct{}
}

func newLogWatch() (*logWatch, *zap.Logger) {
	core, logs := observer.New(zapcore.DebugLevel)
	w := &logWatch{logs: logs, wake: make(chan struct{}, 1)}
	return w, zap.New(zapcore.RegisterHooks(core, func(zapcore.Entry) error {
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return nil
	}))
}

// wait waits until an entry whose message starts with prefix was logged,
// and returns its fields.
func (w *logWatch) wait(t *testing.T, prefix string) map[string]any {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		for _, e := range w.logs.All() {
			if strings.HasPrefix(e.Message, prefix) {
				return e.ContextMap()
			}
		}
		select {
		case <-w.wake:
		case <-timeout.C:
			t.Fatalf("never logged %q", prefix)
		}
	}
}

// waitGone waits, on a watch, until key is not in etcd.
func waitGone(t *testing.T, te *testEtcd, key string) {
	t.Helper()
	cli := te.client()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count == 0 {
		return
	}
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return
			}
		}
	}
	t.Fatalf("%s is there still", key)
}

// ownedBy lists the partitions of topic the replica says id owns.
func ownedBy(m *cluster.EtcdMetastore, topic string, partitions int, id string) []int {
	var out []int
	for p := range partitions {
		if o, _ := m.Owner(topic, p); o == id {
			out = append(out, p)
		}
	}
	return out
}

// leave stops a test node's candidacy and registration.
func (n *testNode) leave(t *testing.T) {
	t.Helper()
	n.assigner.Stop(bg)
	if err := n.member.Leave(bg); err != nil {
		t.Fatal(err)
	}
}

// TestLost_AMarkNeedsTheNodeGoneAndHoldsOffItsRegistration: a live node
// cannot be marked lost, nor an id no node registered under; one that
// left can (twice is nothing more), and its registration is then refused
// until it resolves the mark.
func TestLost_AMarkNeedsTheNodeGoneAndHoldsOffItsRegistration(t *testing.T) {
	te := startEtcd(t)
	a, b := joinNode(t, te, "a"), joinNode(t, te, "b")
	if err := a.ms.MarkLost(bg, "b", time.Now()); !errors.Is(err, cluster.ErrNodeIDLive) {
		t.Fatalf("marking a live node lost: %v, want ErrNodeIDLive", err)
	}
	if err := a.ms.MarkLost(bg, "nobody", time.Now()); !errors.Is(err, cluster.ErrUnknownNode) {
		t.Fatalf("marking an id no node registered under lost: %v, want ErrUnknownNode", err)
	}
	b.leave(t)
	for range 2 {
		if err := a.ms.MarkLost(bg, "b", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.ms.LostNodes(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("lost nodes %v", got)
	}
	_, err := cluster.JoinCluster(bg, cluster.MemberConfig{Client: te.client(), Info: cluster.MemberInfo{ID: "b", Addr: "b.test:8080"}, TTL: 2 * time.Second})
	if !errors.Is(err, cluster.ErrNodeLost) {
		t.Fatalf("a node marked lost registered: %v", err)
	}
}

// TestLost_PartitionsGoOnceTheNodesHorizonPassed: the partitions of a
// node marked lost go to live nodes once the assigner has seen it gone
// for its fence horizon, a move of one of them under way ends with it;
// a node whose registered horizon has not passed keeps its partitions,
// and resolving its mark first keeps them for good. A node resolving its
// mark is told which partitions are no longer its.
func TestLost_PartitionsGoOnceTheNodesHorizonPassed(t *testing.T) {
	te := startEtcd(t)
	a := joinNodeWith(t, te, "a", 2*time.Second) // the leader
	b, c := joinNodeWith(t, te, "b", time.Hour), joinNodeWith(t, te, "c", 2*time.Second)
	heard := subscribe(a.ms)
	if _, _, err := a.ms.CreateTopic(bg, "orders", 12, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	owners(t, a.ms, heard, "orders", 12)
	ofB, ofC := ownedBy(a.ms, "orders", 12, "b"), ownedBy(a.ms, "orders", 12, "c")
	if len(ofB) == 0 || len(ofC) == 0 {
		t.Fatalf("fixture: b owns %v, c %v", ofB, ofC)
	}
	if _, err := a.ms.RequestMove(bg, "orders", ofC[0], "a"); err != nil { // under way when c is lost
		t.Fatal(err)
	}
	b.leave(t)
	c.leave(t)
	for _, id := range []string{"b", "c"} {
		if err := a.ms.MarkLost(bg, id, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	heard.waitFor(t, "c's partitions to go to a", func() bool { return len(ownedBy(a.ms, "orders", 12, "c")) == 0 })
	if got := ownedBy(a.ms, "orders", 12, "a"); len(got) < len(ofC) {
		t.Fatalf("a owns %v after c's %v were given away", got, ofC)
	}
	if moves := a.ms.Moves(); len(moves) != 0 {
		t.Fatalf("the move of c's partition is still under way: %+v", moves)
	}
	if got := ownedBy(a.ms, "orders", 12, "b"); !slices.Equal(got, ofB) {
		t.Fatalf("b, inside its horizon, owns %v, not its %v", got, ofB)
	}

	resolve := func(id string, former []int) (notOwned []int) {
		m := openMetastore(t, te, id)
		resolved, err := m.ResolveLost(bg, func(_ context.Context, _ []string, owned func(string, int) bool) error {
			for _, p := range former {
				if !owned("orders", p) {
					notOwned = append(notOwned, p)
				}
			}
			return nil
		})
		if err != nil || !resolved {
			t.Fatalf("%s resolving its mark: %v, %v", id, resolved, err)
		}
		return notOwned
	}
	if got := resolve("b", ofB); len(got) != 0 {
		t.Fatalf("b was told %v of its %v are not its", got, ofB)
	}
	if got := resolve("c", ofC); !slices.Equal(got, ofC) {
		t.Fatalf("c was told %v are not its; want all of its %v", got, ofC)
	}
	for _, id := range []string{"b", "c"} {
		waitGone(t, te, "/narad/lost/"+id)
	}
	joinNodeWith(t, te, "b", time.Hour)
	if _, _, err := a.ms.CreateTopic(bg, "barrier", 1, runtime.Retention{}); err != nil { // a round after the mark went
		t.Fatal(err)
	}
	owners(t, a.ms, heard, "barrier", 1)
	if got := ownedBy(a.ms, "orders", 12, "b"); !slices.Equal(got, ofB) {
		t.Fatalf("b resolved its mark in time and owns %v, not its %v", got, ofB)
	}
}

// TestLost_TheLiveNodesAreRebalancedOnceALostNodesPartitionsGo: giving a
// lost node's partitions away can leave a live node over its share of all
// partitions (a topic's own balance puts one of them on the node that has
// most already); the moves the placement needs besides are asked for too,
// though the live members did not change then.
func TestLost_TheLiveNodesAreRebalancedOnceALostNodesPartitionsGo(t *testing.T) {
	te := startEtcd(t)
	ids := []string{"a", "b", "c"}
	node := map[string]*testNode{}
	for _, id := range ids {
		node[id] = joinNodeWith(t, te, id, 2*time.Second)
	}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	var parts []cluster.Partition
	current := map[cluster.Partition]string{}
	for i, size := range []int{1, 2, 1} { // one at a time: each placed before the next
		topic := "t" + strconv.Itoa(i)
		if _, _, err := watch.CreateTopic(bg, topic, size, runtime.Retention{}); err != nil {
			t.Fatal(err)
		}
		for p, o := range owners(t, watch, heard, topic, size) {
			parts = append(parts, cluster.Partition{Topic: topic, Index: p})
			current[parts[len(parts)-1]] = o
		}
	}
	lost := "" // a node whose partitions going moves others too
	for _, id := range ids {
		rest := slices.DeleteFunc(slices.Clone(ids), func(other string) bool { return other == id })
		changed := 0
		for p, o := range cluster.Place(parts, rest, current) {
			if o != current[p] && current[p] != id {
				changed++
			}
		}
		if changed > 0 {
			lost = id
			break
		}
	}
	if lost == "" {
		t.Fatalf("fixture: no node's loss moves another's partition: %v", current)
	}
	node[lost].leave(t)
	if err := watch.MarkLost(bg, lost, time.Now()); err != nil {
		t.Fatal(err)
	}
	rest := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == lost })
	heard.waitFor(t, "every partition on a live node, or asked to one, within its share", func() bool {
		headed := map[cluster.Partition]string{}
		for _, p := range parts {
			headed[p], _ = watch.Owner(p.Topic, p.Index)
		}
		for _, mv := range watch.Moves() {
			headed[cluster.Partition{Topic: mv.Topic, Index: mv.Partition}] = mv.To
		}
		perTopic, total := map[string]map[string]int{}, map[string]int{}
		for p, o := range headed {
			if !slices.Contains(rest, o) {
				return false
			}
			if perTopic[p.Topic] == nil {
				perTopic[p.Topic] = map[string]int{}
			}
			perTopic[p.Topic][o]++
			total[o]++
		}
		for _, counts := range perTopic {
			if counts[rest[0]]-counts[rest[1]] > 1 || counts[rest[1]]-counts[rest[0]] > 1 {
				return false
			}
		}
		return total[rest[0]]-total[rest[1]] <= 1 && total[rest[1]]-total[rest[0]] <= 1
	})
}

// TestLost_AReassignmentDuringTheResolveIsSetAsideToo: a partition given
// away between the resolve's read and its clearing of the mark fails the
// clearing; the resolve reads again and sets that one aside too.
func TestLost_AReassignmentDuringTheResolveIsSetAsideToo(t *testing.T) {
	te := startEtcd(t)
	a, b := joinNode(t, te, "a"), joinNode(t, te, "b")
	heard := subscribe(a.ms)
	if _, _, err := a.ms.CreateTopic(bg, "orders", 8, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	owners(t, a.ms, heard, "orders", 8)
	ofB := ownedBy(a.ms, "orders", 8, "b")
	if len(ofB) == 0 {
		t.Fatal("fixture: b owns nothing")
	}
	b.leave(t)
	if err := a.ms.MarkLost(bg, "b", time.Now()); err != nil {
		t.Fatal(err)
	}
	m := openMetastore(t, te, "b")
	var calls [][]int
	_, err := m.ResolveLost(bg, func(_ context.Context, _ []string, owned func(string, int) bool) error {
		var notOwned []int
		for _, p := range ofB {
			if !owned("orders", p) {
				notOwned = append(notOwned, p)
			}
		}
		calls = append(calls, notOwned)
		if len(calls) == 1 { // the assigner gives one away meanwhile
			if _, err := te.client().Put(bg, "/narad/assign/orders/"+strconv.Itoa(ofB[0]), "a"); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || len(calls[0]) != 0 || !slices.Equal(calls[1], ofB[:1]) {
		t.Fatalf("set-aside calls %v; want none, then %v", calls, ofB[:1])
	}
	if resp, err := te.client().Get(bg, "/narad/lost/b", clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("the mark is there still: %v", err)
	}
}

// cutOff is a cluster of a (the leader, its own horizon 2 s) and x, a
// member that reaches etcd through px (cut makes it a node alive but cut
// off), configured by config (its client, id and TTL filled in), and
// topic orders of 8 partitions, ofX of them x's.
type cutOff struct {
	te    *testEtcd
	a     *testNode
	heard *changes
	px    *proxy
	x     *cluster.Member
	ofX   []int
}

func startCutOff(t *testing.T, config func(px *proxy) cluster.MemberConfig) *cutOff {
	t.Helper()
	c := &cutOff{te: startEtcd(t)}
	c.a = joinNodeWith(t, c.te, "a", 2*time.Second)
	c.heard = subscribe(c.a.ms)
	c.px = newProxy(t, c.te)
	xcli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + c.px.path}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xcli.Close() })
	cfg := config(c.px)
	cfg.Client, cfg.Info, cfg.TTL = xcli, cluster.MemberInfo{ID: "x", Addr: "x.test:8080"}, 2*time.Second
	if c.x, err = cluster.JoinCluster(bg, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.x.Leave(bg) })
	if _, _, err := c.a.ms.CreateTopic(bg, "orders", 8, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	owners(t, c.a.ms, c.heard, "orders", 8)
	if c.ofX = ownedBy(c.a.ms, "orders", 8, "x"); len(c.ofX) == 0 {
		t.Fatal("fixture: x owns nothing")
	}
	return c
}

// TestLost_ANodeCutOffFromEtcdStopsServingBeforeItsPartitionsGo: a node
// alive but cut off from etcd stops serving at its fence horizon, before
// its lease runs out; marked lost, its partitions go to a live node once
// the horizon has passed again since it left; when it reaches etcd again
// it sets aside what was given away, clears its mark and serves again.
func TestLost_ANodeCutOffFromEtcdStopsServingBeforeItsPartitionsGo(t *testing.T) {
	logs, logger := newLogWatch()
	var setAside []int
	c := startCutOff(t, func(px *proxy) cluster.MemberConfig {
		xms := openMetastoreThrough(t, px, "x")
		return cluster.MemberConfig{FenceAfter: 2 * time.Second, Logger: logger,
			OnLost: func(ctx context.Context) error {
				_, err := xms.ResolveLost(ctx, func(_ context.Context, _ []string, owned func(string, int) bool) error {
					for p := range 8 {
						if !owned("orders", p) {
							setAside = append(setAside, p)
						}
					}
					return nil
				})
				return err
			},
		}
	})
	te, a, heard, px, x := c.te, c.a, c.heard, c.px, c.x
	if !x.Serving() {
		t.Fatal("a registered node is not serving")
	}

	px.cut()
	logs.wait(t, "fenced")
	if x.Serving() {
		t.Fatal("x logged that it is fenced, and serves")
	}
	waitGone(t, te, "/narad/members/x") // its lease ran out
	if x.Serving() {
		t.Fatal("x serves after its lease ran out")
	}
	if err := a.ms.MarkLost(bg, "x", time.Now()); err != nil {
		t.Fatal(err)
	}
	heard.waitFor(t, "x's partitions to go to a", func() bool { return len(ownedBy(a.ms, "orders", 8, "x")) == 0 })

	px.restore()
	logs.wait(t, "cluster membership serving again: registered")
	if !x.Serving() {
		t.Fatal("x registered again and does not serve")
	}
	if !slices.Equal(setAside, []int{0, 1, 2, 3, 4, 5, 6, 7}) { // its former ones among them, given to a
		t.Fatalf("x was told it owns what %v leaves out; want nothing", setAside)
	}
	waitGone(t, te, "/narad/lost/x")
}

// TestLost_ANewLeaderWaitsOutTheHorizonTheNodeRegistered: a leader that
// never saw the lost node registered (a new term: the likeliest when the
// lost node led) reads the node's horizon from fence/<id>, which its
// registration wrote, and waits it out, not its own shorter one (found by
// review: it gave the partitions away while the node, cut off but alive,
// served them for an hour more).
func TestLost_ANewLeaderWaitsOutTheHorizonTheNodeRegistered(t *testing.T) {
	c := startCutOff(t, func(*proxy) cluster.MemberConfig { return cluster.MemberConfig{FenceAfter: time.Hour} })
	te, a, px, x, ofX := c.te, c.a, c.px, c.x, c.ofX
	var err error

	px.cut()
	waitGone(t, te, "/narad/members/x")
	a.assigner.Stop(bg) // a new term, which never saw x registered
	logs, logger := newLogWatch()
	if a.assigner, err = cluster.StartAssigner(cluster.AssignerConfig{Client: te.client(), NodeID: "a", TTL: 2 * time.Second, FenceAfter: 2 * time.Second, Logger: logger}); err != nil {
		t.Fatal(err)
	}
	if err := a.ms.MarkLost(bg, "x", time.Now()); err != nil {
		t.Fatal(err)
	}
	fields := logs.wait(t, "partition assigner: a node marked lost")
	if fields["horizon"] != time.Hour {
		t.Fatalf("the new leader waits %v for x, want the hour x registered", fields["horizon"])
	}
	if got := ownedBy(a.ms, "orders", 8, "x"); !slices.Equal(got, ofX) || !x.Serving() {
		t.Fatalf("x (serving: %v) owns %v, not its %v, inside its horizon", x.Serving(), got, ofX)
	}
}

// TestLost_ANodeMarkedLostCompletesNoMove: a node whose lease ran out
// while it pulled a live node's partition, and that was marked lost,
// cannot complete the move onto itself (found by review: it did, the old
// owner then dropped its copy, and the partition's records ended up in
// the lost node's set-aside copy only).
func TestLost_ANodeMarkedLostCompletesNoMove(t *testing.T) {
	te := startEtcd(t)
	a, x := joinNode(t, te, "a"), joinNode(t, te, "x")
	heard := subscribe(a.ms)
	if _, _, err := a.ms.CreateTopic(bg, "orders", 8, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	owners(t, a.ms, heard, "orders", 8)
	owners(t, x.ms, subscribe(x.ms), "orders", 8)
	ofA := ownedBy(a.ms, "orders", 8, "a")
	if len(ofA) == 0 {
		t.Fatal("fixture: a owns nothing")
	}
	mv, err := a.ms.RequestMove(bg, "orders", ofA[0], "x")
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := a.ms.FreezeMove(bg, mv, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	x.leave(t)
	if err := x.ms.CompleteMove(bg, frozen); !errors.Is(err, cluster.ErrMoveChanged) {
		t.Fatalf("an unregistered node completing a move: %v, want ErrMoveChanged", err)
	}
	if err := a.ms.MarkLost(bg, "x", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := x.ms.CompleteMove(bg, frozen); !errors.Is(err, cluster.ErrMoveChanged) {
		t.Fatalf("a node marked lost completing a move: %v, want ErrMoveChanged", err)
	}
	if owner, _, err := a.ms.ConfirmOwner(bg, "orders", ofA[0]); err != nil || owner != "a" {
		t.Fatalf("the partition's owner: %q, %v; want a still", owner, err)
	}
}

// TestLost_AHorizonIsAtLeastTheMemberTTL: renewals go every third of the
// TTL, so a shorter horizon would lapse between two of them with etcd
// healthy (found by review); the member raises it to the TTL, and
// registers that.
func TestLost_AHorizonIsAtLeastTheMemberTTL(t *testing.T) {
	te := startEtcd(t)
	x, err := cluster.JoinCluster(bg, cluster.MemberConfig{Client: te.client(), Info: cluster.MemberInfo{ID: "x", Addr: "x.test:8080"}, TTL: 6 * time.Second, FenceAfter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Leave(bg) })
	resp, err := te.client().Get(bg, "/narad/fence/x")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "6000" {
		t.Fatalf("registered fence horizon: %v, %v; want 6000 ms", resp, err)
	}
}

// appliedLine is the substring of a daemon's debug line for each change
// of the topic orders its replica applies.
const appliedLine = `"msg":"topic record applied","topic":"orders"`

// TestCluster_ALostNodesPartitionsGoToLiveNodesAndItsCopiesAreSetAside:
// a node killed and marked lost has its partitions given to the live
// nodes, which serve them from offset 0; back with its disk, it sets its
// copies of them aside under lost/ (its acked records kept there, never
// served), clears its mark and sends clients to the new owners.
//
// The killed node is a daemon: a killed process leaves its registration
// to run out, its logs unclosed and its lock for the kernel to release,
// which no node in this process can honestly stand in for (stopping one
// closes its logs; cutting it off from etcd leaves it running). The
// marks go through the move command, whose exit codes are checked.
func TestCluster_ALostNodesPartitionsGoToLiveNodesAndItsCopiesAreSetAside(t *testing.T) {
	te := startEtcd(t)
	fence := func(c *server.Config) { c.FenceAfter = server.Duration(2 * time.Second) }
	a := startNode(t, te, "a", filepath.Join(t.TempDir(), "a"), fence)
	b := startDaemon(t, te, "b", filepath.Join(t.TempDir(), "b"), "--fence-after", "2s")
	c := startNode(t, te, "c", filepath.Join(t.TempDir(), "c"), fence)
	nodes := []peer{a, b, c}
	watch := openMetastore(t, te, "observer")
	heard := subscribe(watch)
	rec, _, err := a.client().CreateTopic(bg, "orders", 6, client.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	owners(t, watch, heard, "orders", 6)
	produceEach(t, nodes, "orders", 6, 0, 2)
	ofB := ownedBy(watch, "orders", 6, "b")
	if len(ofB) == 0 {
		t.Fatal("fixture: b owns nothing")
	}

	if code, out := runToExit(t, "move", "--addr", a.addr, "--lost", "c"); code != 1 || !strings.Contains(out, "node_live") {
		t.Fatalf("marking a live node lost: exit %d, %s", code, out)
	}
	b.kill()
	seen := []int{a.logCount(appliedLine), c.logCount(appliedLine)}
	waitGone(t, te, "/narad/members/b")
	if code, out := runToExit(t, "move", "--addr", a.addr, "--lost", "b"); code != 0 {
		t.Fatalf("move --lost b: exit %d, %s", code, out)
	}
	heard.waitFor(t, "b's partitions to go to live nodes", func() bool { return len(ownedBy(watch, "orders", 6, "b")) == 0 })
	for i, d := range []*node{a, c} {
		if !d.waitLogCount(appliedLine, seen[i]+1) {
			t.Fatalf("node %s never applied the reassignment", d.id)
		}
	}
	for _, p := range ofB {
		res, err := a.client().Produce(bg, "orders", p, []client.Record{{Value: []byte("after")}})
		if err != nil || res.BaseOffset != 0 {
			t.Fatalf("produce into %d, given away empty: %+v, %v", p, res, err)
		}
	}

	b.start()
	if n := b.logCount("set aside this node's copy"); n != len(ofB) {
		t.Fatalf("b set aside %d copies, want %d", n, len(ofB))
	}
	for _, p := range partitionDirs(t, b, "orders") {
		if slices.Contains(ofB, p) {
			t.Fatalf("b still holds partition %d under topics/", p)
		}
	}
	aside, err := os.ReadDir(filepath.Join(b.dataDir, wire.LostDirName, "orders."+rec.Incarnation))
	if err != nil || len(aside) != len(ofB) {
		t.Fatalf("b's set-aside copies: %d, %v; want %d", len(aside), err, len(ofB))
	}
	waitGone(t, te, "/narad/lost/b")
	for _, p := range ofB {
		got, err := b.client().Fetch(bg, "orders", p, 0, client.FetchOptions{})
		if err != nil || len(got.Records) != 1 || string(got.Records[0].Value) != "after" {
			t.Fatalf("fetch %d through b: %+v, %v; want the new owner's one record", p, got, err)
		}
	}
}

// TestCluster_ANodeThatCannotRenewItsLeaseStopsServing: with etcd away
// past its fence horizon a node answers 503 fenced (and is not ready),
// and serves again once its lease is renewed.
func TestCluster_ANodeThatCannotRenewItsLeaseStopsServing(t *testing.T) {
	te := startEtcd(t)
	a := startNode(t, te, "a", filepath.Join(t.TempDir(), "a"), func(c *server.Config) { c.FenceAfter = server.Duration(2 * time.Second) })
	watch := openMetastore(t, te, "observer")
	if _, _, err := a.client().CreateTopic(bg, "orders", 1, client.Retention{}); err != nil {
		t.Fatal(err)
	}
	owners(t, watch, subscribe(watch), "orders", 1)
	produceEach(t, []*node{a}, "orders", 1, 0, 1)

	te.stop()
	if !a.waitLog("fenced: no lease renewal") {
		t.Fatal("a never fenced itself")
	}
	if _, err := a.client().Produce(bg, "orders", 0, []client.Record{{Value: []byte("x")}}); !errors.Is(err, client.ErrFenced) {
		t.Fatalf("produce into a fenced node: %v, want fenced", err)
	}
	if code, _ := a.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("a fenced node is ready: %d", code)
	}

	te.start()
	if !a.waitLog("cluster membership serving again") {
		t.Fatal("a never renewed its lease")
	}
	produceEach(t, []*node{a}, "orders", 1, 1, 1)
	fetchAll(t, a, "orders", 0, 2)
}

// TestLost_AFenceHorizonIsNoTopicChange: a registration's fence/<id> is
// no change of a topic named <id> for a replica's subscribers (found by
// review: each registration rechecked a topic of the node's name).
func TestLost_AFenceHorizonIsNoTopicChange(t *testing.T) {
	te := startEtcd(t)
	obs := openMetastore(t, te, "obs")
	heard := subscribe(obs)
	joinNode(t, te, "ghost")
	if _, _, err := obs.CreateTopic(bg, "orders", 1, runtime.Retention{}); err != nil { // after the registration's revision
		t.Fatal(err)
	}
	heard.waitFor(t, "orders to be heard", func() bool { return heard.count("orders") > 0 })
	if n := heard.count("ghost"); n != 0 {
		t.Fatalf("subscribers were told %d times that a topic named after the node changed", n)
	}
}
