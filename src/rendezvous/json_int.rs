//! The integers a rendezvous state holds, with the length of their JSON text known without
//! writing it: a join storm counts the bytes of a few entries per compare-and-set, millions
//! of times (`encoded_len`).

/// An integer as JSON writes it, and that text's length.
pub trait JsonInt: itoa::Integer + Copy {
    fn json_len(self) -> usize;
}

macro_rules! json_int_unsigned {
    ($($t:ty),*) => {$(
        impl JsonInt for $t {
            fn json_len(self) -> usize {
                self.checked_ilog10().map_or(1, |digits| digits as usize + 1)
            }
        }
    )*};
}
json_int_unsigned!(u32, u64);

impl JsonInt for i64 {
    fn json_len(self) -> usize {
        usize::from(self < 0) + self.unsigned_abs().json_len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written_len(value: impl JsonInt) -> usize {
        itoa::Buffer::new().format(value).len()
    }

    #[test]
    fn the_counted_length_is_the_written_one_at_every_power_of_ten() {
        let mut edges: Vec<u64> = vec![0, 1, 9, u64::MAX];
        for power in 1..20 {
            let p = 10u64.pow(power);
            edges.extend([p - 1, p, p + 1]);
        }
        for &value in &edges {
            assert_eq!(value.json_len(), written_len(value), "{value}");
            if let Ok(small) = u32::try_from(value) {
                assert_eq!(small.json_len(), written_len(small), "{small}");
            }
            if let Ok(signed) = i64::try_from(value) {
                assert_eq!(signed.json_len(), written_len(signed), "{signed}");
                assert_eq!((-signed).json_len(), written_len(-signed), "-{signed}");
            }
        }
        assert_eq!(i64::MIN.json_len(), written_len(i64::MIN));
    }
}
