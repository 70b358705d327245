package assign

import "testing"

func TestByName(t *testing.T) {
	for _, name := range []string{"uniform", "range", "simple"} {
		a, ok := ByName(name)
		if !ok || a.Name() != name {
			t.Errorf("ByName(%q) = %v, %v", name, a, ok)
		}
	}
	for _, name := range []string{"", "Uniform", "sticky", "cooperative-sticky"} {
		if a, ok := ByName(name); ok || a != nil {
			t.Errorf("ByName(%q) = %v, %v; want nothing", name, a, ok)
		}
	}
}

func TestEmptySpec(t *testing.T) {
	for _, a := range all() {
		got := a.Assign(Spec{})
		if got == nil || len(got) != 0 {
			t.Errorf("%s: Assign(Spec{}) = %#v, want an empty Assignment", a.Name(), got)
		}
	}
}
