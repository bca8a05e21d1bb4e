package natsbus

import (
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
)

// User is one client account of the embedded server. Publish and Subscribe
// list the subjects (wildcards allowed) the user may publish and subscribe
// to; a nil list allows every subject, an empty non-nil list allows none.
// Password may be a bcrypt hash ("$2a$..."), which nats-server then checks
// the client's password against. Build users with WorkerUser, OperatorUser, AuditorUser and IssuerUser.
type User struct {
	Name      string
	Password  string
	Publish   []string
	Subscribe []string
}

// InboxPrefix is the reply-subject prefix of a non-issuer user: its replies
// arrive on InboxPrefix(name)+".>", and it may subscribe to nothing else
// under _INBOX, so it cannot read other users' replies. Clients set it with
// nats.CustomInboxPrefix (ClientOptions does).
func InboxPrefix(name string) string { return "_INBOX." + name }

func inboxSubjects(name string) string { return InboxPrefix(name) + ".>" }

// WorkerUser is a worker: it may publish only on writ.api.<name>.> (so it
// can speak only for itself) and receive replies on its own inbox and the
// leader's announcements (api.SubjectLeader), as every user below may. name must
// pass ValidToken; ServerConfig.Validate rejects it otherwise.
func WorkerUser(name, password string) User {
	return User{
		Name:      name,
		Password:  password,
		Publish:   []string{api.WorkerPrefix + name + ".>"},
		Subscribe: []string{inboxSubjects(name), api.SubjectLeader},
	}
}

// OperatorUser is a human operator's tool: it may publish commands on
// writ.op.> and receive replies on its own inbox.
func OperatorUser(name, password string) User {
	return User{
		Name:      name,
		Password:  password,
		Publish:   []string{api.OperatorWildcard},
		Subscribe: []string{inboxSubjects(name), api.SubjectLeader},
	}
}

// ReviewerUser is a person's reviewer identity (or the chat gateway acting
// for them): it may publish only on writ.review.<name>.> (decisions and
// plain-text replies, which the issuer attributes to reviewer:<name>) and
// receive replies on its own inbox.
func ReviewerUser(name, password string) User {
	return User{
		Name:      name,
		Password:  password,
		Publish:   []string{api.ReviewerPrefix + name + ".>"},
		Subscribe: []string{inboxSubjects(name), api.SubjectLeader},
	}
}

// AuditorPublishSubjects returns the JetStream API subjects AuditorUser may
// publish to: what an ordered consumer on the receipt stream needs (creating
// the consumer and pulling its messages), deleting the consumer it replaces
// after a reset, and the stream info that jetstream.JetStream.Stream reads.
func AuditorPublishSubjects() []string {
	return []string{
		"$JS.API.CONSUMER.CREATE." + events.StreamName + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + events.StreamName + ".>",
		"$JS.API.CONSUMER.DELETE." + events.StreamName + ".>",
		"$JS.API.STREAM.INFO." + events.StreamName,
	}
}

// AuditorUser reads the receipts: it may subscribe to writ.evt.> and its own
// inbox, and publish only the JetStream API requests of an ordered consumer
// on the receipt stream (AuditorPublishSubjects). It cannot publish events.
func AuditorUser(name, password string) User {
	return User{
		Name:      name,
		Password:  password,
		Publish:   AuditorPublishSubjects(),
		Subscribe: []string{events.SubjectAll, inboxSubjects(name), api.SubjectLeader},
	}
}

// IssuerUser is an issuer node: it may publish and subscribe to everything.
func IssuerUser(name, password string) User {
	return User{Name: name, Password: password}
}

// ClientOptions are the nats.Connect options for a user: its credentials and,
// for every user, its own inbox prefix (which the permissions of
// non-issuer users require). Add TLS options as needed.
func ClientOptions(name, password string) []nats.Option {
	return []nats.Option{
		nats.UserInfo(name, password),
		nats.CustomInboxPrefix(InboxPrefix(name)),
		nats.Name(name),
		nats.Timeout(5 * time.Second),
	}
}
