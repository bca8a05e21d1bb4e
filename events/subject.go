package events

// SubjectPrefix is the root of every receipt subject.
const SubjectPrefix = "writ.evt."

// SubjectAll matches every receipt subject.
const SubjectAll = "writ.evt.>"

// Subject returns the JetStream subject an event of kind k is published on.
// Unknown kinds go to writ.evt.unknown so they are still captured.
func Subject(k Kind) string {
	if s, ok := kindSubjects[k]; ok {
		return s
	}
	return SubjectPrefix + "unknown"
}
