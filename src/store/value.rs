//! A store value: shared bytes, or the structure they encode, encoded at most once and only
//! when something reads the bytes.
//!
//! In a join storm of N nodes torch sends O(N²) compare-and-sets of an O(N)-byte state, and
//! all but N of them lose. A losing write's bytes are never stored, compared or read, so
//! the simulator need not produce them: a write carries its state, or only how to make it
//! and its length (`Value::deferred`), and the state is made and encoded when something
//! needs it. Every byte anyone looks at is the byte torch would have sent; only bytes
//! nobody looks at are skipped.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::{Arc, OnceLock};

/// A structure that knows its wire bytes. Its encoding must be one-to-one: equal
/// structures encode to equal bytes and different ones to different bytes, so two values
/// made from structures of one type are compared as structures, without their bytes.
pub trait Encode: PartialEq + Send + Sync + 'static {
    fn encode(&self) -> Vec<u8>;

    /// `encode().len()`, which a type may count without writing the bytes.
    fn encoded_len(&self) -> usize {
        self.encode().len()
    }

    /// `encoded_len()`, given that `base` encodes to `base_len` bytes: a type may count from
    /// there by what differs between the two, when the one is a changed copy of the other.
    fn encoded_len_from(&self, base: &Self, base_len: usize) -> usize {
        let _ = (base, base_len);
        self.encoded_len()
    }
}

/// The type-erased source of a lazy value.
trait Source: Send + Sync {
    fn encode(&self) -> Vec<u8>;
    fn encoded_len(&self) -> usize;
    /// Whether the two encode to the same bytes, when `other` has this one's type.
    fn same_bytes_as(&self, other: &dyn Source) -> Option<bool>;
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl<T: Encode> Source for T {
    fn encode(&self) -> Vec<u8> {
        Encode::encode(self)
    }

    fn encoded_len(&self) -> usize {
        Encode::encoded_len(self)
    }

    fn same_bytes_as(&self, other: &dyn Source) -> Option<bool> {
        other
            .as_any()
            .downcast_ref::<T>()
            .map(|other| self == other)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// A structure whose making is put off until something needs it: the holder of a write
/// that will most likely lose hands over how to make its state, not the state.
pub trait Deferred: Send + Sync + 'static {
    type Output: Encode;
    fn make(&self) -> Arc<Self::Output>;
}

/// The type-erased maker of a deferred value's source.
trait Maker: Send + Sync {
    fn make_source(&self) -> Arc<dyn Source>;
    fn output_type(&self) -> TypeId;
}

impl<D: Deferred> Maker for D {
    fn make_source(&self) -> Arc<dyn Source> {
        self.make()
    }

    fn output_type(&self) -> TypeId {
        TypeId::of::<D::Output>()
    }
}

/// Where a value's bytes come from.
enum Origin {
    /// The bytes themselves.
    Bytes,
    /// A structure, encoded when first read.
    Made(Arc<dyn Source>),
    /// A structure made when first needed, then encoded when first read.
    Deferred {
        maker: Arc<dyn Maker>,
        made: OnceLock<Arc<dyn Source>>,
    },
}

impl Origin {
    /// The structure, making a deferred one now.
    fn source(&self) -> Option<&Arc<dyn Source>> {
        match self {
            Origin::Bytes => None,
            Origin::Made(source) => Some(source),
            Origin::Deferred { maker, made } => Some(made.get_or_init(|| maker.make_source())),
        }
    }

    /// The structure's type, without making a deferred one.
    fn source_type(&self) -> Option<TypeId> {
        match self {
            Origin::Bytes => None,
            Origin::Made(source) => Some(Any::type_id(source.as_any())),
            Origin::Deferred { maker, .. } => Some(maker.output_type()),
        }
    }
}

struct Inner {
    bytes: OnceLock<Box<[u8]>>,
    /// How many bytes a lazy value has, counted without writing them, until `bytes` is set.
    len: OnceLock<usize>,
    /// A hash of the bytes, made the first time the value is compared with another.
    fingerprint: OnceLock<u64>,
    origin: Origin,
}

/// A stored value. Clones share it: handing one value to every reader, keeping it as a
/// token or remembering it for a resent request copies nothing.
#[derive(Clone)]
pub struct Value(Arc<Inner>);

impl Value {
    /// A value whose bytes are `source.encode()`, computed when first read.
    pub fn lazy<T: Encode>(source: Arc<T>) -> Self {
        Value(Arc::new(Inner {
            bytes: OnceLock::new(),
            len: OnceLock::new(),
            fingerprint: OnceLock::new(),
            origin: Origin::Made(source),
        }))
    }

    /// A value whose structure `deferred` makes when something first needs it (its bytes,
    /// the structure itself, a comparison), and which has `len` bytes: the maker must know
    /// its length without making it, and a wrong one would be a wrong simulation, not a
    /// detectable error, so `bytes()` checks it once the bytes exist.
    pub fn deferred<D: Deferred>(len: usize, deferred: Arc<D>) -> Self {
        Value(Arc::new(Inner {
            bytes: OnceLock::new(),
            len: OnceLock::from(len),
            fingerprint: OnceLock::new(),
            origin: Origin::Deferred {
                maker: deferred,
                made: OnceLock::new(),
            },
        }))
    }

    /// A value whose bytes are `source.encode()`, like [`Value::lazy`], where `source` is a
    /// changed copy of `base`'s structure: its length is counted from `base`'s
    /// (`Encode::encoded_len_from`), which costs what the change costs rather than what the
    /// whole structure does. A `base` made from bytes, or from another type, gives no
    /// shortcut: the length is then counted in full when first asked for.
    pub fn lazy_from<T: Encode>(source: Arc<T>, base: &Value) -> Self {
        let len = OnceLock::new();
        if let Some(base_source) = base.source::<T>() {
            let counted = source.encoded_len_from(&base_source, base.len());
            len.set(counted).expect("a new cell is empty");
        }
        Value(Arc::new(Inner {
            bytes: OnceLock::new(),
            len,
            fingerprint: OnceLock::new(),
            origin: Origin::Made(source),
        }))
    }

    /// The bytes (encoding them now if nobody has yet).
    pub fn bytes(&self) -> &[u8] {
        self.0.bytes.get_or_init(|| {
            let Some(source) = self.0.origin.source() else {
                return Box::default();
            };
            let bytes = source.encode().into_boxed_slice();
            if let Some(&counted) = self.0.len.get() {
                assert_eq!(
                    counted,
                    bytes.len(),
                    "a value counted to {counted} bytes encodes to {}",
                    bytes.len()
                );
            }
            bytes
        })
    }

    /// The structure a lazy value was made from, when it is a `T` (making a deferred one).
    pub fn source<T: Encode>(&self) -> Option<Arc<T>> {
        let source = Arc::clone(self.0.origin.source()?);
        source.into_any().downcast::<T>().ok()
    }

    /// Whether the value was made from a `T`, or will be: this makes nothing.
    pub fn is_made_from<T: Encode>(&self) -> bool {
        self.0.origin.source_type() == Some(TypeId::of::<T>())
    }

    /// Whether the two are one value (not merely equal bytes).
    pub fn same(a: &Value, b: &Value) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// A hash of the bytes, computed once per value.
    fn fingerprint(&self) -> u64 {
        *self.0.fingerprint.get_or_init(|| {
            // Only ever compared for equality within one run, so any fixed hash will do.
            let mut hasher = std::hash::DefaultHasher::new();
            std::hash::Hasher::write(&mut hasher, self.bytes());
            std::hash::Hasher::finish(&hasher)
        })
    }

    /// How many bytes the value has: the store checks its bound and counts what it sends
    /// by this, which encodes nothing.
    pub fn len(&self) -> usize {
        self.known_len().unwrap_or_else(|| {
            *self.0.len.get_or_init(|| match self.0.origin.source() {
                Some(source) => source.encoded_len(),
                None => 0,
            })
        })
    }

    /// The length when it is known without counting: the bytes exist, or it was counted.
    fn known_len(&self) -> Option<usize> {
        self.0
            .bytes
            .get()
            .map(|bytes| bytes.len())
            .or_else(|| self.0.len.get().copied())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::ops::Deref for Value {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

/// Byte equality, as TCPStore compares. One value is equal to itself without a byte
/// compare; two of known, different lengths are not; two made from structures of one type
/// are equal when the structures are (their encoding is one-to-one), which needs no bytes;
/// other values of different lengths or fingerprints differ without a byte compare: a stale
/// token and the state that replaced it often have the same length (a keep-alive changes a
/// timestamp), and comparing them byte by byte cost a join storm O(nodes) per attempt.
impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        if Value::same(self, other) {
            return true;
        }
        if let (Some(mine), Some(theirs)) = (self.known_len(), other.known_len()) {
            if mine != theirs {
                return false;
            }
        }
        let mine = self.0.origin.source_type();
        if mine.is_some() && mine == other.0.origin.source_type() {
            let (a, b) = (self.0.origin.source(), other.0.origin.source());
            if let Some(same) = a.zip(b).and_then(|(a, b)| a.same_bytes_as(b.as_ref())) {
                return same;
            }
        }
        self.len() == other.len()
            && self.fingerprint() == other.fingerprint()
            && self.bytes() == other.bytes()
    }
}

impl Eq for Value {}

impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Self {
        Value(Arc::new(Inner {
            bytes: OnceLock::from(bytes.into_boxed_slice()),
            len: OnceLock::new(),
            fingerprint: OnceLock::new(),
            origin: Origin::Bytes,
        }))
    }
}

impl From<&[u8]> for Value {
    fn from(bytes: &[u8]) -> Self {
        Value::from(bytes.to_vec())
    }
}

impl<const N: usize> From<&[u8; N]> for Value {
    fn from(bytes: &[u8; N]) -> Self {
        Value::from(bytes.to_vec())
    }
}

/// Shown as its bytes, as the `Vec<u8>` values it replaced were.
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.bytes(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted(&'static str, AtomicUsize);

    impl PartialEq for Counted {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    impl Encode for Counted {
        fn encode(&self) -> Vec<u8> {
            self.1.fetch_add(1, Ordering::Relaxed);
            self.0.as_bytes().to_vec()
        }
    }

    #[test]
    fn a_lazy_value_encodes_once_and_only_when_read() {
        let source = Arc::new(Counted("abc", AtomicUsize::new(0)));
        let lazy = Value::lazy(Arc::clone(&source));
        let copy = lazy.clone();
        assert_eq!(source.1.load(Ordering::Relaxed), 0);
        assert!(lazy == copy, "one value equals itself without encoding");
        assert_eq!(source.1.load(Ordering::Relaxed), 0);
        assert_eq!(copy.bytes(), b"abc");
        assert_eq!(lazy, Value::from(&b"abc"[..]));
        assert_eq!(source.1.load(Ordering::Relaxed), 1);
        assert!(Arc::ptr_eq(
            &lazy.source::<Counted>().expect("source"),
            &source
        ));
        assert!(Value::from(&b"abc"[..]).source::<Counted>().is_none());
        assert_ne!(lazy, Value::from(&b"abd"[..]));
    }

    /// Text that counts how often its length was counted from another text's.
    struct Text(String, AtomicUsize);

    impl PartialEq for Text {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    impl Encode for Text {
        fn encode(&self) -> Vec<u8> {
            self.0.as_bytes().to_vec()
        }

        fn encoded_len_from(&self, base: &Self, base_len: usize) -> usize {
            self.1.fetch_add(1, Ordering::Relaxed);
            base_len + self.0.len() - base.0.len()
        }
    }

    #[test]
    fn a_derived_value_counts_its_length_from_its_base() {
        let text = |s: &str| Arc::new(Text(s.to_owned(), AtomicUsize::new(0)));
        let base = Value::lazy(text("abc"));
        let derived = text("abcde");
        let value = Value::lazy_from(Arc::clone(&derived), &base);
        assert_eq!(derived.1.load(Ordering::Relaxed), 1);
        assert_eq!((value.len(), value.bytes()), (5, &b"abcde"[..]));
        // From bytes, or from another type, the length is counted in full and only if asked.
        let from_bytes = Value::lazy_from(text("xy"), &Value::from(&b"abc"[..]));
        let from_other =
            Value::lazy_from(text("xyz"), &Value::lazy(Arc::new(Counted("a", 0.into()))));
        assert_eq!((from_bytes.len(), from_other.len()), (2, 3));
    }

    #[test]
    fn lazy_values_compare_and_measure_without_encoding() {
        let a = Value::lazy(Arc::new(Counted("abc", AtomicUsize::new(0))));
        let b = Value::lazy(Arc::new(Counted("abc", AtomicUsize::new(0))));
        let c = Value::lazy(Arc::new(Counted("xyz", AtomicUsize::new(0))));
        assert!(a == b && a != c);
        let encodes = |v: &Value| v.source::<Counted>().unwrap().1.load(Ordering::Relaxed);
        assert_eq!((encodes(&a), encodes(&b), encodes(&c)), (0, 0, 0));
        // The default length encodes once (a type may count instead) and is remembered.
        assert_eq!((a.len(), a.len()), (3, 3));
        assert_eq!(encodes(&a), 1);
    }

    /// Makes a `Counted` and counts how often it was asked to.
    struct MakesCounted(&'static str, AtomicUsize);

    impl Deferred for MakesCounted {
        type Output = Counted;

        fn make(&self) -> Arc<Counted> {
            self.1.fetch_add(1, Ordering::Relaxed);
            Arc::new(Counted(self.0, AtomicUsize::new(0)))
        }
    }

    #[test]
    fn a_deferred_value_is_made_once_and_only_when_needed() {
        let maker = Arc::new(MakesCounted("abc", AtomicUsize::new(0)));
        let value = Value::deferred(3, Arc::clone(&maker));
        let made = || maker.1.load(Ordering::Relaxed);
        assert_eq!(value.len(), 3);
        assert!(value.is_made_from::<Counted>() && !value.is_made_from::<Text>());
        assert_ne!(value, Value::from(&b"abcd"[..]), "lengths differ");
        assert_eq!(made(), 0);
        assert_eq!(value.bytes(), b"abc");
        assert!(value.source::<Counted>().is_some());
        assert_eq!(made(), 1);
    }

    #[test]
    #[should_panic(expected = "a value counted to 2 bytes encodes to 3")]
    fn a_deferred_value_of_a_wrong_length_fails_when_encoded() {
        let value = Value::deferred(2, Arc::new(MakesCounted("abc", AtomicUsize::new(0))));
        let _ = value.bytes();
    }
}
