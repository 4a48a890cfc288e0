package client

// KeyPartition is the partition of a record with a key, of a topic of
// partitions partitions: the key's 32-bit FNV-1a hash modulo partitions,
// both taken as unsigned 32-bit integers. Every client that places keys
// (this package's Producer, the produce command) uses it, so a key goes
// to the same partition whichever of them sends it:
//
//	h := uint32(2166136261)        // the FNV-1a offset basis
//	for _, b := range key {
//		h ^= uint32(b)
//		h *= 16777619              // the FNV prime, wrapping at 2^32
//	}
//	partition := h % uint32(partitions)
//
// An empty key is no key (the binary batch encoding carries none): the
// Producer spreads such records instead. It is not Kafka's partitioner
// (murmur2): the same key may go to another partition number than in
// Kafka. partitions must be positive.
func KeyPartition(key []byte, partitions int) int {
	return int(fnv1a32(key) % uint32(partitions))
}

// fnv1a32 is the 32-bit FNV-1a hash of b (as hash/fnv's New32a, written
// out so the function the package doc gives is the code itself).
func fnv1a32(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}
