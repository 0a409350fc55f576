pub struct Thing;

// crate::family::one::one() is what makes one.
pub const NAME: &str = "crate::family::one";

#[cfg(test)]
mod tests {
    use crate::family::one::one;
}
