pub struct Thing;

pub fn make() -> Thing {
    super::super::family::one::one()
}
