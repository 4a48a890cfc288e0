package clustertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/narad-io/storage/cluster"
	"github.com/narad-io/storage/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// proxy forwards a Unix socket to etcd's; cut drops every connection and
// refuses new ones (a node cut off from etcd), restore lets them in; hold
// keeps what etcd sends from the node (its calls still reach etcd, their
// answers and its watches' events wait: a node whose view of etcd lags),
// release lets it through.
type proxy struct {
	t      *testing.T
	path   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	gate   chan struct{} // closed while etcd's bytes pass; a new one while held
}

func newProxy(t *testing.T, te *testEtcd) *proxy { return newProxyAt(t, te, "proxy.sock") }

// newProxyAt is newProxy listening at name in te's directory.
func newProxyAt(t *testing.T, te *testEtcd, name string) *proxy {
	p := &proxy{t: t, path: filepath.Join(te.dir, name), target: te.socket, gate: make(chan struct{})}
	close(p.gate)
	p.restore()
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) restore() {
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("unix", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close(); c.Close() }()
			go func() { p.fromEtcd(c, u); u.Close(); c.Close() }()
		}
	}()
}

// fromEtcd forwards what etcd sends on u to the node on c, each read
// once the gate is open.
func (p *proxy) fromEtcd(c, u net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // held already
	}
}

func (p *proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

func (p *proxy) cut() {
	p.release() // nothing waits on the gate of a connection dropped
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// openMetastoreThrough opens node's metastore with a client of its own
// that reaches etcd through px; the test closes both.
func openMetastoreThrough(t *testing.T, px *proxy, node string) *cluster.EtcdMetastore {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + px.path}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	m, err := cluster.OpenEtcdMetastore(bg, cluster.Config{Client: cli, NodeID: node, ProgressInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestEtcdMetastore_AResumedWatchClaimsOnlyWhatItApplied: a node cut off
// from etcd while others write more than 1000 revisions under the prefix;
// its client resumes the watch on its own, and etcd sends the backlog in
// batches of 1000 revisions, each headed with its current revision. The
// replica counts as applied only the revisions of the events it applied,
// so neither CaughtUp nor a change's return comes before the topic
// created meanwhile is in the replica (written by review; both failed).
func TestEtcdMetastore_AResumedWatchClaimsOnlyWhatItApplied(t *testing.T) {
	te := startEtcd(t)
	px := newProxy(t, te)
	m := openMetastoreThrough(t, px, "a")
	waitCaughtUp(t, m, true)

	px.cut()
	waitCaughtUp(t, m, false)
	putJunk(t, te.client(), 4000)
	b := openMetastore(t, te, "b")
	rec, _, err := b.CreateTopic(bg, "orders", 1, runtime.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	px.restore()

	waitCaughtUp(t, m, true)
	_, caughtUpHas, _ := m.Topic(bg, "orders")

	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if _, _, err := m.CreateTopic(ctx, "orders", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	_, ryw, _ := m.Topic(bg, "orders")
	if !caughtUpHas || !ryw {
		t.Fatalf("topic orders (version %d) in the replica: when CaughtUp turned true %v; after CreateTopic returned it %v", rec.Version, caughtUpHas, ryw)
	}
}

// TestEtcdMetastore_ACompactionWhileCutOffIsReadAgain: the revisions a
// resumed watch needs were compacted while the node was cut off: the
// replica reads the prefix again, and sees the delete and the create it
// missed (written by review).
func TestEtcdMetastore_ACompactionWhileCutOffIsReadAgain(t *testing.T) {
	te := startEtcd(t)
	px := newProxy(t, te)
	m := openMetastoreThrough(t, px, "a")
	heard := subscribe(m)
	if _, _, err := m.CreateTopic(bg, "old", 1, runtime.Retention{}); err != nil {
		t.Fatal(err)
	}
	px.cut()
	b := openMetastore(t, te, "b")
	if err := b.DeleteTopic(bg, "old"); err != nil {
		t.Fatal(err)
	}
	rec, _, err := b.CreateTopic(bg, "orders", 1, runtime.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := te.client().Compact(bg, int64(rec.Version)); err != nil {
		t.Fatal(err)
	}
	px.restore()
	heard.waitFor(t, "the replica to read again", func() bool {
		_, o, _ := m.Topic(bg, "orders")
		_, d, _ := m.Topic(bg, "old")
		return o && !d
	})
}

// putJunk writes n keys under the prefix that are no record: revisions
// a replica's watch must get through.
func putJunk(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := cli.Put(bg, fmt.Sprintf("/narad/junk/%d", i), "x"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}
