package fsm

import (
	"strings"

	"github.com/writ-dev/writ/api"
)

// Plain-text replies. A person answers a review in a chat message ("keep",
// "lgtm", "q3-report_v2_keep", "keep all three", "no"); DecodeReply turns
// the text into a ReplyIntent through a fixed table and nothing else: no
// state, no guessing. Whether the intent decides a review is the state
// machine's business (OpReviewReply): only when it binds to exactly one
// live review (or, for "all", to exactly the live ones) that the sender
// may decide. A word copied from a message is never authority by itself:
// a keep token names one version of one artifact, and binds to that
// version alone.
//
// The table (matching is on lower-cased words; punctuation separates
// words):
//
//	<slug>_v<N>_keep           approves that exact review (version N)
//	<slug>_v<N>_review         names that review; the words decide
//	keep approve approved yes yep yeah y lgtm ok okay accept accepted
//	confirm confirmed proceed ship "go ahead" "looks good"
//	"sounds good" "approve it"  acceptance
//	no nope nah reject rejected deny denied decline declined stop
//	cancel discard drop veto    rejection
//	not don't dont never        negation: with acceptance, unclear
//	all every everything both   every live candidate ("both": two)
//	two..ten, 2..10             how many the person means
//
// Acceptance and rejection (or negation) in one reply is VerdictUnclear:
// nothing is decided. A keep token is acceptance.

// Verdict is what a reply's words decide.
type Verdict uint8

// Verdicts.
const (
	VerdictNone    Verdict = iota // no decision word and no keep token
	VerdictApprove                // acceptance only
	VerdictReject                 // rejection only
	VerdictUnclear                // both, or acceptance under a negation
)

func (v Verdict) String() string {
	switch v {
	case VerdictApprove:
		return "approve"
	case VerdictReject:
		return "reject"
	case VerdictUnclear:
		return "unclear"
	}
	return "none"
}

// ReplyRef is one review a reply names: a keep token or a caption.
type ReplyRef struct {
	Slug    string
	Version uint64
	Keep    bool // a keep token (acceptance), not a caption
}

// Token is the ref as written: <slug>_v<N>_keep or <slug>_v<N>_review.
func (r ReplyRef) Token() string {
	if r.Keep {
		return KeepToken(r.Slug, r.Version)
	}
	return Caption(r.Slug, r.Version)
}

// ReplyIntent is a decoded reply.
type ReplyIntent struct {
	Verdict Verdict
	Refs    []ReplyRef // in the order written, without repeats
	All     bool       // "all", "both", "every": every live candidate
	Count   int        // how many the person said (0: not said)
}

// MaxReplyScan bounds how much of a reply DecodeReply reads: a longer
// text is decoded from its first MaxReplyScan bytes only.
const MaxReplyScan = 4096

// MaxReplyRefs bounds the reviews one reply may name.
const MaxReplyRefs = 16

var (
	acceptWords = map[string]bool{
		"keep": true, "approve": true, "approved": true, "yes": true, "yep": true, "yeah": true, "y": true,
		"lgtm": true, "ok": true, "okay": true, "accept": true, "accepted": true, "confirm": true,
		"confirmed": true, "proceed": true, "ship": true,
	}
	acceptPhrases = [][2]string{{"go", "ahead"}, {"looks", "good"}, {"sounds", "good"}}
	rejectWords   = map[string]bool{
		"no": true, "nope": true, "nah": true, "reject": true, "rejected": true, "deny": true, "denied": true,
		"decline": true, "declined": true, "stop": true, "cancel": true, "discard": true, "drop": true, "veto": true,
	}
	negations = map[string]bool{"not": true, "don't": true, "dont": true, "never": true}
	allWords  = map[string]bool{"all": true, "every": true, "everything": true, "both": true}
	counts    = map[string]int{
		"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
		"2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9, "10": 10,
	}
)

// DecodeReply decodes a plain-text reply through the table above. It is
// pure and total: any text decodes, most to VerdictNone.
func DecodeReply(text string) ReplyIntent {
	if len(text) > MaxReplyScan {
		text = text[:MaxReplyScan]
	}
	words := replyWords(strings.ToLower(text))
	var in ReplyIntent
	accept, reject, negate := false, false, false
	for i, w := range words {
		if ref, ok := parseReplyRef(w); ok {
			if ref.Keep {
				accept = true
			}
			if len(in.Refs) < MaxReplyRefs && !containsRef(in.Refs, ref) {
				in.Refs = append(in.Refs, ref)
			}
			continue
		}
		switch {
		case acceptWords[w]:
			accept = true
		case rejectWords[w]:
			reject = true
		case negations[w]:
			negate = true
		}
		if allWords[w] {
			in.All = true
			if w == "both" && in.Count == 0 {
				in.Count = 2
			}
		}
		if n, ok := counts[w]; ok && in.Count == 0 {
			in.Count = n
		}
		if i+1 < len(words) {
			for _, p := range acceptPhrases {
				if w == p[0] && words[i+1] == p[1] {
					accept = true
				}
			}
		}
	}
	switch {
	case accept && (reject || negate):
		in.Verdict = VerdictUnclear
	case accept:
		in.Verdict = VerdictApprove
	case reject:
		in.Verdict = VerdictReject
	}
	return in
}

func containsRef(refs []ReplyRef, r ReplyRef) bool {
	for _, x := range refs {
		if x.Slug == r.Slug && x.Version == r.Version {
			return true
		}
	}
	return false
}

// replyWords splits lower-cased text into words: runs of letters, digits
// and the characters a slug, a token or "don't" use ('-', '_', '\”).
func replyWords(s string) []string {
	isWord := func(b byte) bool {
		return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '\''
	}
	var out []string
	for i := 0; i < len(s); {
		if !isWord(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWord(s[j]) {
			j++
		}
		w := strings.Trim(s[i:j], "'-")
		if w != "" {
			out = append(out, w)
		}
		i = j
	}
	return out
}

// parseReplyRef parses <slug>_v<N>_keep or <slug>_v<N>_review.
func parseReplyRef(w string) (ReplyRef, bool) {
	slug, n, keep, ok := api.ParseReviewRef(w)
	return ReplyRef{Slug: slug, Version: n, Keep: keep}, ok
}

// MaxSlug is the longest review slug.
const MaxSlug = api.MaxSlug

// ValidSlug reports whether s may name a review (api.ValidSlug).
func ValidSlug(s string) bool { return api.ValidSlug(s) }

// Caption is a review's human caption: <slug>_v<N>_review.
func Caption(slug string, version uint64) string { return api.ReviewCaption(slug, version) }

// KeepToken is the word that approves exactly that review: <slug>_v<N>_keep.
func KeepToken(slug string, version uint64) string { return api.KeepToken(slug, version) }

// SlugFor derives a review slug from a tool name (for the reviews an
// approval_required answer opens): lower case, runs of other characters
// as one hyphen, "call" when nothing is left or it starts with a digit.
func SlugFor(tool string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(tool) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		default:
			dash = true
		}
		if b.Len() >= MaxSlug-6 {
			break
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		s = strings.TrimRight("call-"+s, "-")
	}
	if len(s) > MaxSlug {
		s = strings.TrimRight(s[:MaxSlug], "-")
	}
	return s
}
