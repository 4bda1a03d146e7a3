//! The `--sizes` argument: `4K:64M` (doubling), `1K:1M:4` (times 4), or a list `1K,16M,64M`.
//! Suffixes are binary (K = 1024) as in nccl-tests' `-b 8 -e 128M`.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepError {
    #[error("`{0}` is not a size (a number with an optional K, M or G suffix, e.g. 4K)")]
    BadSize(String),
    #[error("size range `{0}`: the end is below the start")]
    Backwards(String),
    #[error("size range `{0}`: the factor must be at least 2")]
    BadFactor(String),
    #[error("no sizes given")]
    Empty,
}

/// One size: `4096`, `4K`, `64M`, `1G`, `1.5M` (bytes, binary suffixes).
pub fn parse_size(s: &str) -> Result<usize, SweepError> {
    let bad = || SweepError::BadSize(s.to_string());
    let mut t = s.trim();
    if let Some(x) = t.strip_suffix(['B', 'b']) {
        t = x.strip_suffix('i').unwrap_or(x);
    }
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: usize = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(bad()),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    if let Ok(n) = num.parse::<usize>() {
        return n.checked_mul(mult).ok_or_else(bad);
    }
    match num.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 => Ok((f * mult as f64).round() as usize),
        _ => Err(bad()),
    }
}

/// The sizes of a sweep, ascending as given.
pub fn parse_sweep(s: &str) -> Result<Vec<usize>, SweepError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let fields: Vec<&str> = part.split(':').collect();
        match fields.as_slice() {
            [one] => out.push(parse_size(one)?),
            [a, b] | [a, b, _] => {
                let (lo, hi) = (parse_size(a)?, parse_size(b)?);
                let factor = match fields.get(2) {
                    Some(f) => f
                        .trim()
                        .parse::<usize>()
                        .map_err(|_| SweepError::BadFactor(part.into()))?,
                    None => 2,
                };
                if factor < 2 {
                    return Err(SweepError::BadFactor(part.into()));
                }
                if hi < lo {
                    return Err(SweepError::Backwards(part.into()));
                }
                let mut v = lo.max(1);
                while v <= hi {
                    out.push(v);
                    v = match v.checked_mul(factor) {
                        Some(x) => x,
                        None => break,
                    };
                }
            }
            _ => return Err(SweepError::BadSize(part.into())),
        }
    }
    if out.is_empty() {
        return Err(SweepError::Empty);
    }
    Ok(out)
}

/// `1048576` -> `1M`, `1536` -> `1536`: the shortest exact binary form, for tables.
pub fn human_size(bytes: usize) -> String {
    for (suffix, unit) in [("G", 1usize << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_double_and_lists_keep_their_order() {
        assert_eq!(
            parse_sweep("4K:64K").unwrap(),
            vec![4096, 8192, 16384, 32768, 65536]
        );
        assert_eq!(parse_sweep("4K:64M").unwrap().len(), 15);
        assert_eq!(
            parse_sweep("1K:1M:4").unwrap(),
            vec![1024, 4096, 16384, 65536, 262144, 1 << 20]
        );
        assert_eq!(
            parse_sweep("1M, 16M,64M").unwrap(),
            vec![1 << 20, 16 << 20, 64 << 20]
        );
        assert_eq!(parse_sweep("8").unwrap(), vec![8]);
        assert_eq!(parse_sweep("1.5K").unwrap(), vec![1536]);
        assert_eq!(parse_sweep("4KiB:8KiB").unwrap(), vec![4096, 8192]);
        assert_eq!(parse_sweep("5K:12K").unwrap(), vec![5120, 10240]);
    }

    #[test]
    fn bad_sweeps_say_what_is_wrong() {
        assert_eq!(parse_sweep("4Q"), Err(SweepError::BadSize("4Q".into())));
        assert_eq!(
            parse_sweep("64M:4K"),
            Err(SweepError::Backwards("64M:4K".into()))
        );
        assert_eq!(
            parse_sweep("1K:4K:1"),
            Err(SweepError::BadFactor("1K:4K:1".into()))
        );
        assert_eq!(parse_sweep(" , "), Err(SweepError::Empty));
        assert!(parse_sweep("1:2:3:4").is_err());
    }

    #[test]
    fn sizes_print_short() {
        assert_eq!(human_size(1 << 20), "1M");
        assert_eq!(human_size(4096), "4K");
        assert_eq!(human_size(1536), "1536");
        assert_eq!(human_size(3 << 30), "3G");
    }
}
