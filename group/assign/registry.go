package assign

// ByName returns the assignor clients and group.consumer.assignors (or, for
// share groups, group.share.assignors) call name. Names match exactly, as
// Kafka's do.
func ByName(name string) (Assignor, bool) {
	for _, a := range all() {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

func all() []Assignor { return []Assignor{Uniform(), Range(), Simple()} }
