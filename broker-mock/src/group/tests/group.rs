//! Generations: persisted once, replayed.

use super::*;

#[test]
fn generations_are_reported_once_and_replayed() {
    let mut h = Harness::new(0);
    let (_a, _b, gen) = two_member_group_no_delay(&mut h);
    let news = h.groups.take_new_generations();
    assert_eq!(news.len(), 1);
    assert_eq!(news[0].generation_id, gen);
    assert_eq!(news[0].protocol_name.as_deref(), Some("range"));
    assert!(h.groups.take_new_generations().is_empty());

    let mut fresh = Groups::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        1,
    );
    fresh.apply_generation("g", Some((5, "consumer".into())));
    fresh.apply_generation("g", Some((4, "consumer".into())));
    assert_eq!(fresh.state_of("g"), Some((GroupState::Empty, 5)));
    assert!(fresh.take_new_generations().is_empty(), "replayed, not new");
    let mut req = Harness::join_req("", None, b"m");
    req.version = 3;
    let out = fresh.join(req, 1, 0);
    assert!(matches!(&out[0], Delivery::Join(1, r) if r.generation_id == 6));
    fresh.apply_generation("x", Some((1, String::new())));
    fresh.apply_generation("x", None);
    assert_eq!(fresh.state_of("x"), None);
}
