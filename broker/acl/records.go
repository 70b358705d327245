package acl

import "github.com/fjordlog/fjord/controller"

// Bindings are stored in the metadata log as controller.ACL records, with
// Kafka's wire codes; these convert between the two.

// FromRecord is the binding an ACL record of the metadata log holds.
func FromRecord(a controller.ACL) Binding {
	return Binding{ResourceType: ResourceType(a.ResourceType), Name: a.Name, Pattern: PatternType(a.PatternType),
		Principal: a.Principal, Host: a.Host, Operation: Operation(a.Operation), Permission: Permission(a.Permission)}
}

// Record is bd as the metadata log stores it.
func (bd Binding) Record() controller.ACL {
	return controller.ACL{ResourceType: int8(bd.ResourceType), Name: bd.Name, PatternType: int8(bd.Pattern),
		Principal: bd.Principal, Host: bd.Host, Operation: int8(bd.Operation), Permission: int8(bd.Permission)}
}

// Stored is a creation as it is stored: checked as Kafka checks it
// (Binding.Validate, the error being INVALID_REQUEST's message), its host
// in normal form. The CreateAcls handler and the active controller
// (active.Config.ACLBinding) both use it.
func Stored(bd Binding) (Binding, error) {
	if err := bd.Validate(); err != nil {
		return bd, err
	}
	bd.Host = NormalizeHost(bd.Host)
	return bd, nil
}
