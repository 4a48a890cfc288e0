// Package cluster runs narad-storaged nodes as one cluster on etcd, which
// is the cluster's consensus: this package writes none of its own
// (docs/scaling.md).
//
// It owns the cluster's half of runtime.Metastore: EtcdMetastore keeps the
// topic records and the partition assignment in etcd under one key prefix,
// and serves a node a replica of them held in memory and fed by a watch.
//
// Key layout under the prefix:
//
//	topics/<name>          a topic record (JSON); its Version is the key's mod revision
//	assign/<name>/<p>      the id of the node that owns partition p of the topic
//	members/<id>           a live node's MemberInfo (JSON), under its lease
//	moves/<name>/<p>       a move of the partition under way (Move, JSON)
//	assigner/...           the election of the node that writes assign/
//	drain/<id>             the node is draining: its partitions move off
//	lost/<id>              the node is marked lost: its partitions go to live nodes (lost.go)
//	fence/<id>             the node's fence horizon in ms, put at each registration; it outlives the lease (lost.go)
//	rebalanced             the members the assigner last rebalanced for ("": rebalance next round)
//	cluster-id             the cluster's id, made by its first node
//
// Its parts: the metastore, membership with a fence (a node serves only
// while its lease renewals are answered within its fence horizon), an
// elected assigner that gives each new partition an owner and takes one
// away only from a node an operator marked lost (lost.go), and the
// records of partition moves (moves.go). narad-storaged runs on them with
// --metastore etcd://..., answers calls for other nodes' partitions with
// 421, and runs the moves an operator asks for or the assigner plans when
// the members change (a join, a drain); its mover pulls the files.
package cluster
