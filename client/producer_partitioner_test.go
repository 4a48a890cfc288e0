package client

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"
)

// TestKeyPartition_TheDocumentedFunction: the hash is FNV-1a 32 (the
// published vectors, and hash/fnv on random keys), and these keys go to
// these partitions, for good: another client placing keys matches this
// table.
func TestKeyPartition_TheDocumentedFunction(t *testing.T) {
	for key, want := range map[string]uint32{"": 0x811c9dc5, "a": 0xe40c292c, "foobar": 0xbf9cf968} {
		if got := fnv1a32([]byte(key)); got != want {
			t.Fatalf("fnv1a32(%q) = %#x, want %#x", key, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		key := make([]byte, rng.IntN(40))
		for i := range key {
			key[i] = byte(rng.Uint32())
		}
		h := fnv.New32a()
		h.Write(key)
		if got, want := fnv1a32(key), h.Sum32(); got != want {
			t.Fatalf("fnv1a32(%x) = %#x, hash/fnv says %#x", key, got, want)
		}
	}
	for _, v := range []struct {
		key        string
		partitions int
		want       int
	}{
		{"user-42", 1, 0}, {"user-42", 4, 3}, {"user-42", 16, 11}, {"user-42", 100, 99},
		{"order-7", 16, 11}, {"a", 16, 12}, {"\xff\x00", 7, 3}, {"foobar", 1000, 720},
	} {
		if got := KeyPartition([]byte(v.key), v.partitions); got != v.want {
			t.Errorf("KeyPartition(%q, %d) = %d, want %d", v.key, v.partitions, got, v.want)
		}
	}
}

func ExampleKeyPartition() {
	fmt.Println(KeyPartition([]byte("user-42"), 16))
	// Output: 11
}
