//! Atomic arithmetic on target memory: every `ptl_op_t` on every integer type, float and double,
//! little-endian in memory.
//!
//! Atomicity with respect to other Portals atomics comes from the engine being single-threaded
//! behind the driver's lock: the read-modify-write below is never interleaved with another
//! Portals operation on the same bytes.

use crate::memory::{OutOfBounds, Region};
use crate::proto::{is_swap_op, OpKind};
use crate::types::{AtomicOp, AtomicType};

/// Whether `op` is allowed on `dt` in an operation of `kind` (target-side check; a violation
/// is reported as `NI_OP_VIOLATION`).
pub(crate) fn op_allowed(kind: OpKind, op: AtomicOp, dt: AtomicType) -> bool {
    let family_ok = match kind {
        OpKind::Swap => is_swap_op(op),
        OpKind::Atomic | OpKind::FetchAtomic => !is_swap_op(op),
        OpKind::Put | OpKind::Get => false,
    };
    let float = matches!(dt, AtomicType::Float | AtomicType::Double);
    let bitwise = matches!(
        op,
        AtomicOp::Lor
            | AtomicOp::Land
            | AtomicOp::Lxor
            | AtomicOp::Bor
            | AtomicOp::Band
            | AtomicOp::Bxor
            | AtomicOp::Mswap
    );
    family_ok && !(float && bitwise)
}

/// Whether a swap with `op` works on exactly one element and needs an operand.
pub(crate) fn single_element(op: AtomicOp) -> bool {
    is_swap_op(op) && op != AtomicOp::Swap
}

/// One element type.
trait Elem: Copy + PartialOrd {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn truth(self) -> bool;
    fn of_bool(b: bool) -> Self;
    /// Bitwise ops; only reached for integers (floats are refused by [`op_allowed`]).
    fn bits(self, o: Self, f: fn(u64, u64) -> u64) -> Self;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
            fn store(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn truth(self) -> bool { self != 0 }
            fn of_bool(b: bool) -> Self { b as $t }
            // `as` conversions here are deliberate bit reinterpretations (sign-extension for
            // the signed types is undone by the truncating cast back).
            fn bits(self, o: Self, f: fn(u64, u64) -> u64) -> Self { f(self as u64, o as u64) as $t }
        }
    )*};
}
int_elem!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
            fn store(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_le_bytes());
            }
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
            fn truth(self) -> bool { self != 0.0 }
            fn of_bool(b: bool) -> Self { if b { 1.0 } else { 0.0 } }
            fn bits(self, _o: Self, _f: fn(u64, u64) -> u64) -> Self { self }
        }
    )*};
}
float_elem!(f32, f64);

/// Combines one element: `t` is the target's value, `d` the incoming data, `c` the operand
/// (compare value or mask) of a swap. Conditional swaps test `operand <cmp> target`.
fn combine<T: Elem>(op: AtomicOp, t: T, d: T, c: T) -> T {
    match op {
        AtomicOp::Min => {
            if d < t {
                d
            } else {
                t
            }
        }
        AtomicOp::Max => {
            if d > t {
                d
            } else {
                t
            }
        }
        AtomicOp::Sum => t.add(d),
        AtomicOp::Prod => t.mul(d),
        AtomicOp::Lor => T::of_bool(t.truth() || d.truth()),
        AtomicOp::Land => T::of_bool(t.truth() && d.truth()),
        AtomicOp::Lxor => T::of_bool(t.truth() != d.truth()),
        AtomicOp::Bor => t.bits(d, |a, b| a | b),
        AtomicOp::Band => t.bits(d, |a, b| a & b),
        AtomicOp::Bxor => t.bits(d, |a, b| a ^ b),
        AtomicOp::Swap => d,
        AtomicOp::Cswap => pick(c == t, d, t),
        AtomicOp::CswapNe => pick(c != t, d, t),
        AtomicOp::CswapLe => pick(c <= t, d, t),
        AtomicOp::CswapLt => pick(c < t, d, t),
        AtomicOp::CswapGe => pick(c >= t, d, t),
        AtomicOp::CswapGt => pick(c > t, d, t),
        // Bits set in the mask come from the data, the others stay.
        AtomicOp::Mswap => {
            let keep = t.bits(c, |t, m| t & !m);
            d.bits(c, |d, m| d & m).bits(keep, |a, b| a | b)
        }
    }
}

fn pick<T>(cond: bool, yes: T, no: T) -> T {
    if cond {
        yes
    } else {
        no
    }
}

fn combine_slice<T: Elem>(op: AtomicOp, target: &mut [u8], data: &[u8], operand: &[u8]) {
    let c = if operand.len() >= T::SIZE {
        T::load(operand)
    } else {
        T::of_bool(false)
    };
    for (t, d) in target
        .chunks_exact_mut(T::SIZE)
        .zip(data.chunks_exact(T::SIZE))
    {
        combine(op, T::load(t), T::load(d), c).store(t);
    }
}

/// Applies `op` on `dt` to `data.len()` bytes of `region` at `at`, combining with `data` (and
/// `operand` for swaps). The previous bytes are copied into `fetched` when given (same length
/// as `data`). The caller has checked the op/type, that `data.len()` is a multiple of the
/// element size and that the range lies in the region.
pub(crate) fn apply(
    op: AtomicOp,
    dt: AtomicType,
    region: &Region,
    at: usize,
    data: &[u8],
    operand: &[u8],
    mut fetched: Option<&mut [u8]>,
) -> Result<(), OutOfBounds> {
    // A stack buffer, processed chunk by chunk: no allocation per atomic. 256 is a multiple of
    // every element size, so no element straddles two chunks.
    let mut buf = [0u8; 256];
    let mut done = 0;
    while done < data.len() {
        let n = (data.len() - done).min(buf.len());
        let chunk = &mut buf[..n];
        region.read(at + done, chunk)?;
        if let Some(f) = fetched.as_deref_mut() {
            f[done..done + n].copy_from_slice(chunk);
        }
        let d = &data[done..done + n];
        match dt {
            AtomicType::Int8 => combine_slice::<i8>(op, chunk, d, operand),
            AtomicType::Uint8 => combine_slice::<u8>(op, chunk, d, operand),
            AtomicType::Int16 => combine_slice::<i16>(op, chunk, d, operand),
            AtomicType::Uint16 => combine_slice::<u16>(op, chunk, d, operand),
            AtomicType::Int32 => combine_slice::<i32>(op, chunk, d, operand),
            AtomicType::Uint32 => combine_slice::<u32>(op, chunk, d, operand),
            AtomicType::Int64 => combine_slice::<i64>(op, chunk, d, operand),
            AtomicType::Uint64 => combine_slice::<u64>(op, chunk, d, operand),
            AtomicType::Float => combine_slice::<f32>(op, chunk, d, operand),
            AtomicType::Double => combine_slice::<f64>(op, chunk, d, operand),
        }
        region.write(at + done, chunk)?;
        done += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: AtomicOp, dt: AtomicType, target: &[u8], data: &[u8], operand: &[u8]) -> Vec<u8> {
        let r = Region::from_bytes(target);
        let mut old = vec![0u8; data.len()];
        apply(op, dt, &r, 0, data, operand, Some(&mut old)).unwrap();
        assert_eq!(old, target, "fetched bytes are the previous contents");
        r.to_vec(0, target.len()).unwrap()
    }

    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn integer_ops() {
        use AtomicOp::*;
        let t = i32s(&[5, -3, 0, 7]);
        let d = i32s(&[2, 4, 0, -7]);
        let cases: [(AtomicOp, [i32; 4]); 10] = [
            (Min, [2, -3, 0, -7]),
            (Max, [5, 4, 0, 7]),
            (Sum, [7, 1, 0, 0]),
            (Prod, [10, -12, 0, -49]),
            (Lor, [1, 1, 0, 1]),
            (Land, [1, 1, 0, 1]),
            (Lxor, [0, 0, 0, 0]),
            (Bor, [7, -3 | 4, 0, 7 | -7]),
            (Band, [0, -3 & 4, 0, 7 & -7]),
            (Bxor, [7, -3 ^ 4, 0, 7 ^ -7]),
        ];
        for (op, want) in cases {
            assert_eq!(
                run(op, AtomicType::Int32, &t, &d, &[]),
                i32s(&want),
                "{op:?}"
            );
        }
        // Unsigned wrap-around and ordering differ from signed.
        assert_eq!(
            run(AtomicOp::Sum, AtomicType::Uint8, &[250, 1], &[10, 1], &[]),
            vec![4, 2]
        );
        assert_eq!(
            run(
                AtomicOp::Max,
                AtomicType::Uint8,
                &[0x80, 1],
                &[1, 0xff],
                &[]
            ),
            vec![0x80, 0xff]
        );
        assert_eq!(
            run(AtomicOp::Max, AtomicType::Int8, &[0x80, 1], &[1, 0xff], &[]),
            vec![1, 1]
        );
    }

    #[test]
    fn swaps() {
        let t = 10u64.to_le_bytes();
        let d = 99u64.to_le_bytes();
        let dt = AtomicType::Uint64;
        let swapped = d.to_vec();
        let kept = t.to_vec();
        let cmp = |c: u64| c.to_le_bytes();
        assert_eq!(run(AtomicOp::Swap, dt, &t, &d, &cmp(0)), swapped);
        assert_eq!(run(AtomicOp::Cswap, dt, &t, &d, &cmp(10)), swapped);
        assert_eq!(run(AtomicOp::Cswap, dt, &t, &d, &cmp(11)), kept);
        assert_eq!(run(AtomicOp::CswapNe, dt, &t, &d, &cmp(11)), swapped);
        assert_eq!(run(AtomicOp::CswapNe, dt, &t, &d, &cmp(10)), kept);
        assert_eq!(run(AtomicOp::CswapLe, dt, &t, &d, &cmp(10)), swapped);
        assert_eq!(run(AtomicOp::CswapLe, dt, &t, &d, &cmp(11)), kept);
        assert_eq!(run(AtomicOp::CswapLt, dt, &t, &d, &cmp(9)), swapped);
        assert_eq!(run(AtomicOp::CswapLt, dt, &t, &d, &cmp(10)), kept);
        assert_eq!(run(AtomicOp::CswapGe, dt, &t, &d, &cmp(10)), swapped);
        assert_eq!(run(AtomicOp::CswapGe, dt, &t, &d, &cmp(9)), kept);
        assert_eq!(run(AtomicOp::CswapGt, dt, &t, &d, &cmp(11)), swapped);
        assert_eq!(run(AtomicOp::CswapGt, dt, &t, &d, &cmp(10)), kept);
        let got = run(
            AtomicOp::Mswap,
            AtomicType::Uint16,
            &0xaaaau16.to_le_bytes(),
            &0x5555u16.to_le_bytes(),
            &0x00ffu16.to_le_bytes(),
        );
        assert_eq!(got, 0xaa55u16.to_le_bytes());
    }

    #[test]
    fn floats_and_validity() {
        let t: Vec<u8> = [1.5f64, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let d: Vec<u8> = [2.25f64, 3.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let want: Vec<u8> = [3.75f64, 1.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(run(AtomicOp::Sum, AtomicType::Double, &t, &d, &[]), want);
        let want: Vec<u8> = [2.5f32 * 4.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(
            run(
                AtomicOp::Prod,
                AtomicType::Float,
                &2.5f32.to_le_bytes(),
                &4.0f32.to_le_bytes(),
                &[]
            ),
            want
        );
        assert!(!op_allowed(
            OpKind::Atomic,
            AtomicOp::Bor,
            AtomicType::Float
        ));
        assert!(!op_allowed(
            OpKind::Atomic,
            AtomicOp::Lxor,
            AtomicType::Double
        ));
        assert!(!op_allowed(
            OpKind::Swap,
            AtomicOp::Mswap,
            AtomicType::Double
        ));
        assert!(op_allowed(
            OpKind::Swap,
            AtomicOp::Cswap,
            AtomicType::Double
        ));
        assert!(!op_allowed(
            OpKind::Atomic,
            AtomicOp::Swap,
            AtomicType::Int8
        ));
        assert!(!op_allowed(OpKind::Swap, AtomicOp::Sum, AtomicType::Int8));
        assert!(op_allowed(
            OpKind::FetchAtomic,
            AtomicOp::Sum,
            AtomicType::Int8
        ));
    }

    #[test]
    fn long_operands_cross_chunks() {
        // 1000 u32 elements span several 256-byte chunks.
        let n = 1000u32;
        let t: Vec<u8> = (0..n).flat_map(|i| i.to_le_bytes()).collect();
        let d: Vec<u8> = (0..n).flat_map(|i| (3 * i).to_le_bytes()).collect();
        let want: Vec<u8> = (0..n).flat_map(|i| (4 * i).to_le_bytes()).collect();
        assert_eq!(run(AtomicOp::Sum, AtomicType::Uint32, &t, &d, &[]), want);
    }
}
