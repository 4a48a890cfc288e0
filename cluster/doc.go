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
// records of partition moves (moves.go).
//
// A node takes part through a Participant (participant.go), which a
// server opens over its data directory and its runtime.Node: the data
// directory's identity (participant_identity.go), joining and leaving,
// the lost-mark set-aside (participant_join.go), the partitions' move
// locks and the drops of copies other nodes own (copies.go), and the
// moves: its mover (mover.go, pull.go) pulls each partition moving to
// the node from its old owner through a Transfer (transfer.go), whose
// other end is the old owner's Participant (transfer_source.go). The
// package speaks no HTTP: package server carries a Transfer over HTTP
// beside its API (and answers calls for other nodes' partitions with
// 421); DirectTransfer joins Participants of one process.
package cluster
