package cluster

import (
	"context"
	"testing"

	"github.com/narad-io/storage/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestRebalance_ADrainWhoseEveryPartitionIsMovingPlacesNothing: while a
// node drains, the assigner asks its partitions off it in every round,
// but a round in which each of them already has a move under way has
// nothing to ask, and so no placement to make (docs/scaling.md: a round
// places only when it has something to place, not for a move's
// progress). Found by review: each such round placed the whole cluster
// (seconds, for a million partitions), once for every freeze and every
// completion of the drain's moves.
func TestRebalance_ADrainWhoseEveryPartitionIsMovingPlacesNothing(t *testing.T) {
	a := &Assigner{keys: newKeys(""), logger: zap.NewNop()}
	st := clusterState{
		topics:     []topicAt{{runtime.TopicRecord{Name: "orders", Partitions: 2}, 1}},
		owners:     map[partitionKey]string{{"orders", 0}: "a", {"orders", 1}: "a"},
		moves:      map[partitionKey]Move{},
		live:       map[string]bool{"a": true, "b": true},
		draining:   map[string]bool{"a": true},
		rebalanced: "b", // the drain was rebalanced for already
	}
	for p := range 2 {
		st.moves[partitionKey{"orders", p}] = Move{ID: "m", Topic: "orders", Partition: p, From: "a", To: "b", State: MoveRequested, Rev: 2}
	}
	placed := 0
	st.plan = &roundPlan{place: func() map[Partition]string {
		placed++
		return map[Partition]string{{"orders", 0}: "b", {"orders", 1}: "b"}
	}}
	txn := a.txns(context.Background(), clientv3.Cmp{}, "") // nothing to write: it never reaches etcd
	if err := a.rebalance(context.Background(), txn, st, st.eligible()); err != nil {
		t.Fatal(err)
	}
	if placed != 0 {
		t.Fatalf("a round with every draining partition moving placed the cluster %d times; want none", placed)
	}
}
