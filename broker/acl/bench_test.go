package acl

import (
	"strconv"
	"testing"
)

// BenchmarkAuthorize: one check against n topic ACLs (a linear scan of
// the type's bindings).
func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var bs []Binding
			for i := range n {
				bs = append(bs, pre(ResourceTopic, "team"+strconv.Itoa(i)+".", "User:u"+strconv.Itoa(i), "*", OpWrite, PermAllow))
			}
			a := New(Config{}, bs)
			b.ResetTimer()
			for range b.N {
				a.Authorize("User:u7", "10.0.0.1", OpWrite, ResourceTopic, "team7.orders")
			}
		})
	}
}
