// Package datadir keeps what a node's data directory says about who may
// serve it: its lock, one holder at a time, and its identity, the node
// and cluster ids a cluster's node records in it. runtime, cluster and
// narad-storaged share it.
//
//	lock.go        Acquire, Lock, InUse: <data dir>/LOCK and the holder's pid
//	identity.go    the node and cluster ids a directory records, and the rule for ids
//
// A data directory that has served as a node of a cluster records which
// node and which cluster, so that it is never served under another id, in
// another cluster, or as a node alone: each of those would read the
// directory against topic records that do not name its topics, and the
// startup sweep would purge every one of them as a deleted topic's
// leftover. A node alone's data directory holds its metastore file
// instead (runtime.ServedAlone), and is never taken by a cluster's node
// for the same reason.
//
// The files are part of the on-disk format (wire.LockFileName,
// wire.NodeIDFileName, wire.ClusterIDFileName), and every file operation
// goes through the vfs.FS the caller gives (nil is the real file system),
// so the simulated disk can fail or crash any of them.
package datadir
