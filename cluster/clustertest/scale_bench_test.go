package clustertest

import (
	"testing"
	"time"

	"github.com/narad-io/storage/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkEtcd_PerPartitionCost measures what partitions cost a
// cluster's etcd (docs/scaling.md): a topic of 10,000 partitions made on
// three members, every partition given an owner, then the bytes its keys
// and values take under the prefix, etcd's backend size, and the watch
// bytes one node's replica received, each per partition, and the time
// from the create to every owner in a replica.
//
//	cd cluster/clustertest && go test -run '^$' -bench PerPartitionCost -benchtime 1x
func BenchmarkEtcd_PerPartitionCost(b *testing.B) {
	const partitions = 10000
	for range b.N {
		b.StopTimer()
		te := startEtcd(b)
		nodes := []*testNode{joinNode(b, te, "a"), joinNode(b, te, "b"), joinNode(b, te, "c")}
		heard := subscribe(nodes[0].ms)
		before := backendSize(b, te)
		b.StartTimer()
		start := time.Now()
		if _, _, err := nodes[0].ms.CreateTopic(bg, "orders", partitions, runtime.Retention{}); err != nil {
			b.Fatal(err)
		}
		heard.waitFor(b, "every partition to have an owner", func() bool {
			for p := range partitions {
				if _, ok := nodes[0].ms.Owner("orders", p); !ok {
					return false
				}
			}
			return true
		})
		took := time.Since(start)
		b.StopTimer()
		resp, err := te.client().Get(bg, "/narad/", clientv3.WithPrefix())
		if err != nil {
			b.Fatal(err)
		}
		kv := 0
		for _, x := range resp.Kvs {
			kv += len(x.Key) + len(x.Value)
		}
		b.ReportMetric(float64(kv)/partitions, "kv-bytes/partition")
		b.ReportMetric(float64(backendSize(b, te)-before)/partitions, "backend-bytes/partition")
		b.ReportMetric(float64(took.Microseconds())/partitions, "assign-µs/partition")
	}
}

// backendSize is the etcd server's backend (bbolt) size in bytes.
func backendSize(b *testing.B, te *testEtcd) int64 {
	b.Helper()
	return te.e.Server.Backend().Size()
}
