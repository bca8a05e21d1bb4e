package events

// SubjectPrefix is the root of every receipt subject.
const SubjectPrefix = "writ.evt."

// SubjectAll matches every receipt subject.
const SubjectAll = "writ.evt.>"

// StreamName is the JetStream stream that holds every receipt, on the
// subjects SubjectAll matches.
const StreamName = "WRIT_EVENTS"

// Subject returns the JetStream subject an event of kind k is published on.
// Unknown kinds go to writ.evt.unknown so they are still captured.
func Subject(k Kind) string {
	if int(k) < len(subjectTable) && subjectTable[k] != "" {
		return subjectTable[k]
	}
	return SubjectPrefix + "unknown"
}

// subjectTable is kindSubjects as a table, as kindKnown is kindNames: the
// state machine asks for the subject of every event it records, and the
// map lookup showed in its profile.
var subjectTable = func() (t [len(kindKnown)]string) {
	for k, s := range kindSubjects {
		t[k] = s // a kind past the table's end fails here, at init
	}
	return t
}()
