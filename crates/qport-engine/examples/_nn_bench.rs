// Temporary benchmark (nn engineer); deleted after use.
use qport_core::Tensor;
use std::time::Instant;

fn npy(path: &str) -> Tensor {
    let b = std::fs::read(path).unwrap();
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    let h = std::str::from_utf8(&b[10..10 + hl]).unwrap();
    let s = &h[h.find("'shape': (").unwrap() + 10..];
    let s = &s[..s.find(')').unwrap()];
    let shape: Vec<usize> = s.split(',').filter(|x| !x.trim().is_empty()).map(|x| x.trim().parse().unwrap()).collect();
    let v: Vec<f32> = b[10 + hl..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Tensor::from_vec(shape, v).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let home = std::env::var("HOME").unwrap();
    let name = args.get(1).cloned().unwrap_or("efficientnet-lite0".into());
    let model = qport_onnx::load::load(format!("{home}/.cache/qport/fixtures/models/{name}.onnx")).unwrap();
    println!("unsupported: {:?}", qport_engine::unsupported_ops(&model));
    let plan = qport_engine::Plan::new(&model).unwrap();
    let iname = plan.inputs().next().unwrap().name.clone();
    let mut worst = 0f64;
    for i in 0..16 {
        let x = npy(&format!("{home}/.cache/qport/fixtures/parity/{name}/{i:02}.input.npy"));
        let want = npy(&format!("{home}/.cache/qport/fixtures/parity/{name}/{i:02}.output_0.npy"));
        let t = Instant::now();
        let out = plan.run(vec![(iname.clone(), x)]).unwrap();
        let dt = t.elapsed();
        let got = out[0].1.as_slice::<f32>().unwrap();
        let w = want.as_slice::<f32>().unwrap();
        let maxabs = w.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
        let err = got.iter().zip(w).map(|(a, b)| (a - b).abs() as f64).fold(0.0, f64::max);
        worst = worst.max(err / maxabs);
        println!("{i:02}: {:.2} ms, max abs err {err:.3e} (rel to max {:.3e})", dt.as_secs_f64() * 1e3, err / maxabs);
    }
    println!("worst rel {worst:.3e}");
}
